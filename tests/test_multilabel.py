"""Shankar et al.'s multi-label annotations: reading the published JSON, matching it to datasets, the label sets, the
class slices and every cell of the multi-label table, recomputed by hand."""

import copy
import csv
import json
from dataclasses import replace

import pyarrow as pa
import pytest
import yaml

from tests.conftest import LAYOUT
from tests.multilabel_fixture import ANNOTATIONS, v2_id, val
from tests.test_analysis import prediction_table
from tests.test_tables import wilson
from zoomeval.analysis.class_groups import DOG, ORGANISM, class_groups, descendants
from zoomeval.analysis.multilabel_scores import one_crop_predictions, score
from zoomeval.analysis.scoring import analyze_predictions
from zoomeval.core.config import MULTILABEL_ANNOTATIONS, ConfigError
from zoomeval.core.io import write_parquet
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import transforms
from zoomeval.datasets.multilabel import (
    Coverage,
    MultiLabels,
    dataset_labels,
    read_annotations,
    read_coverage,
    read_dataset_labels,
    write_dataset_labels,
)
from zoomeval.registries import load_config
from zoomeval.report.multilabel_table import COLUMNS, NO_IMAGENET_M, NO_TOP5, summary, write_table_multilabel


def write_json(path, document):
    path.write_text(json.dumps(document))
    return path


def test_the_published_shape_is_read_with_indices_and_flags(tmp_path):
    annotations = read_annotations(write_json(tmp_path / "h.json", ANNOTATIONS))
    assert len(annotations) == 9
    assert annotations[val(1)] == MultiLabels((0, 1), (), (), problematic=False, imagenet_m=False)
    assert annotations[val(2)] == MultiLabels((), (), (151,), problematic=False, imagenet_m=True)
    assert annotations[val(3)] == MultiLabels((999,), (), (), problematic=True, imagenet_m=True)
    assert annotations[val(5)] == MultiLabels((530,), (409,), (), problematic=False, imagenet_m=True)
    assert annotations[v2_id("b")] == MultiLabels((409, 530), (999,), (), problematic=False, imagenet_m=False)
    assert val(64) not in annotations  # flagged problematic, but never annotated


def broken(change):
    document = copy.deepcopy(ANNOTATIONS)
    change(document)
    return document


@pytest.mark.parametrize(
    "document, message",
    [
        ([1, 2], "the document is a list, expected an object with initial_annots"),
        (broken(lambda d: d.pop("imagenet_m")), "no key 'imagenet_m'; is this Shankar et al.'s"),
        (broken(lambda d: d.update(problematic_images=[val(3)])), "problematic_images is a list, expected an object"),
        (
            broken(lambda d: d["initial_annots"].update({"ILSVRC2012_val_00000008.jpg": {}})),
            r"1 image name\(s\) that are neither .* e.g. \['ILSVRC2012_val_00000008.jpg'\]",
        ),
        (
            broken(lambda d: d["imagenet_m"].append(val(4))),
            r"imagenet_m\[3\] \('ILSVRC2012_val_00000004.JPEG'\) is not an image of initial_annots",
        ),
        (
            broken(lambda d: d["initial_annots"].update({val(9): ["n01440764"]})),
            r"initial_annots\['ILSVRC2012_val_00000009.JPEG'\] is a list, expected an object",
        ),
        (
            broken(lambda d: d["initial_annots"][val(1)].update(maybe=[])),
            r"initial_annots\['ILSVRC2012_val_00000001.JPEG'\] has key\(s\) \['maybe'\]",
        ),
        (
            broken(lambda d: d["initial_annots"][val(1)].update(correct="n01440764")),
            r"\['correct'\] is a string, expected a list of wnids",
        ),
        (
            broken(lambda d: d["initial_annots"][val(1)].update(wrong=["n99999999"])),
            r"\['wrong'\] names \['n99999999'\], not ImageNet-1k wnids",
        ),
    ],
)
def test_a_file_of_another_shape_is_refused_naming_the_key(tmp_path, document, message):
    with pytest.raises(ValueError, match=message):
        read_annotations(write_json(tmp_path / "h.json", document))


def test_a_cut_file_is_refused(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps(ANNOTATIONS)[:100])
    with pytest.raises(ValueError, match="h.json: not a JSON document"):
        read_annotations(path)


V2_IDS = [f"0/{v2_id('a')}", f"409/{v2_id('b')}", f"530/{v2_id('c')}"]


def test_dataset_images_are_matched_by_name_and_counted(tmp_path):
    annotations = read_annotations(write_json(tmp_path / "h.json", ANNOTATIONS))
    val_ids = [val(n).removesuffix(".JPEG") for n in range(1, 8)]
    labels, coverage = dataset_labels(annotations, val_ids, "imagenet_val", "imagenet")
    assert list(labels) == [val_ids[i] for i in (0, 1, 2, 4, 5, 6)]  # manifest order, image 4 absent
    assert coverage == Coverage(n_images=7, n_annotated=6, n_problematic=1, n_imagenet_m=3)
    labels, coverage = dataset_labels(annotations, V2_IDS, "imagenet_v2", "v2")
    assert labels == {V2_IDS[0]: annotations[v2_id("a")], V2_IDS[1]: annotations[v2_id("b")]}
    assert coverage == Coverage(n_images=3, n_annotated=2, n_problematic=0, n_imagenet_m=0)
    write_dataset_labels(tmp_path / "l.parquet", labels, coverage, "v2", "ab" * 32)
    assert read_dataset_labels(tmp_path / "l.parquet") == labels and read_coverage(tmp_path / "l.parquet") == coverage
    # ImageNet-V2's first public release named its files 0.jpeg, 1.jpeg, ...: nothing matches, nothing is guessed
    with pytest.raises(ValueError, match=r"dataset 'v2': none of its 2 images \(ids such as \['0/0', '0/1'\]\) is"):
        dataset_labels(annotations, ["0/0", "0/1"], "imagenet_v2", "v2")


def test_the_class_groups_are_shankar_et_al_s_from_wordnet():
    groups = class_groups()
    assert {name: len(classes) for name, classes in groups.items()} == {
        "objects": 590,
        "organisms": 410,
        "no_dogs": 882,
    }
    assert sorted(descendants(DOG)) == list(range(151, 269))  # the 118 dog classes
    # organisms: the 398 animals, ballplayer, groom, scuba diver, daisy, yellow lady's slipper, the 7 fungi
    assert sorted(descendants(ORGANISM)) == [*range(398), 981, 982, 983, 985, 986, *range(991, 998)]


# Hand-made predictions at scales 224 and 256 (18 transforms). Each image predicts its "base" class everywhere but at
# the transforms in OVERRIDES, and stores TOP5 at every transform.
VAL_RECORDS = [
    Record(val(n).removesuffix(".JPEG"), "x.JPEG", [label], [], 10, 10)
    for n, label in enumerate([0, 151, 999, 409, 530, 1, 0], start=1)
]
V2_RECORDS = [Record(i, "x.jpeg", [int(i.split("/")[0])], [], 10, 10) for i in V2_IDS]
BASE = {1: 1, 2: 151, 3: 999, 4: 409, 5: 409, 6: 0, 7: 2, V2_IDS[0]: 0, V2_IDS[1]: 530, V2_IDS[2]: 530}
OVERRIDES = {(5, 224, 0, 0): 530, (7, 224, 2, 2): 0}
TOP5 = {
    1: [1, 0, 2, 3, 4],
    2: [151, 152, 153, 154, 155],
    3: [999, 0, 1, 2, 3],
    4: [409, 0, 1, 2, 3],
    5: [409, 530, 0, 1, 2],
    6: [0, 2, 3, 4, 5],
    7: [2, 3, 4, 5, 6],
    V2_IDS[0]: [0, 1, 2, 3, 4],
    V2_IDS[1]: [530, 409, 0, 1, 2],
    V2_IDS[2]: [530, 0, 1, 2, 3],
}


def key(record):
    return int(record.image_id[-1]) if record.image_id.startswith("ILSVRC") else record.image_id


def write_predictions(path, records, dataset, model="m", top5=True):
    rows = [(r.image_id, t) for r in records for t in transforms([224, 256])]
    by_id = {r.image_id: key(r) for r in records}
    preds = [OVERRIDES.get((by_id[i], t.scale, t.row, t.col), BASE[by_id[i]]) for i, t in rows]
    table = prediction_table(rows, preds)
    if top5:
        table = table.append_column("top5", pa.array([TOP5[by_id[i]] for i, _ in rows], pa.list_(pa.int16(), 5)))
    meta = {
        "model": {"name": model},
        "variant": "original",
        "dataset": dataset,
        "scales": [224, 256],
        "class_set": "full",
        "crop_size": 224,
    }
    write_parquet(path, table, meta)
    return path


def table_scores(tmp_path, top5=True, model="m"):
    """The scores of one model on the val and V2 fixtures, through the multilabel analysis (top_k = 1)."""
    annotations = read_annotations(write_json(tmp_path / "h.json", ANNOTATIONS))
    scores = []
    for dataset, adapter, records in (("imagenet", "imagenet_val", VAL_RECORDS), ("v2", "imagenet_v2", V2_RECORDS)):
        labels, coverage = dataset_labels(annotations, [r.image_id for r in records], adapter, dataset)
        write_dataset_labels(labels_path := tmp_path / f"{dataset}.parquet", labels, coverage, dataset, "0" * 64)
        path = tmp_path / f"{dataset}.{model}.predictions.parquet"
        predictions = write_predictions(path, records, dataset, model, top5)
        bad = {"unreadable": 1} if dataset == "imagenet" else {}  # one val image was left out as bad
        analysis = analyze_predictions(
            predictions,
            records,
            top_k=1,
            label_set="multilabel",
            labels_path=labels_path,
            n_excluded=sum(bad.values()),
            bad=bad,
        )
        scores.append(
            score(
                dataset,
                one_crop_predictions(predictions),
                records,
                read_dataset_labels(labels_path),
                coverage,
                class_groups(),
                analysis.metrics,
            )
        )
    return scores


def test_the_label_sets_score_the_fixture_by_hand(tmp_path):
    annotations = read_annotations(write_json(tmp_path / "h.json", ANNOTATIONS))
    labels, coverage = dataset_labels(annotations, [r.image_id for r in VAL_RECORDS], "imagenet_val", "imagenet")
    write_dataset_labels(tmp_path / "l.parquet", labels, coverage, "imagenet", "0" * 64)
    predictions = write_predictions(tmp_path / "p.parquet", VAL_RECORDS, "imagenet")
    multi = analyze_predictions(
        predictions, VAL_RECORDS, top_k=1, label_set="multilabel", labels_path=tmp_path / "l.parquet"
    ).metrics
    # images 1, 2, 5, 6, 7 (3 problematic, 4 not annotated); 1-crop: only 1; any transform: 1, 5 (224, 0, 0) and
    # 7 (224, 2, 2); the first greedy pick is (224, 0, 0), which solves 1 and 5 and comes before (224, 2, 2)
    assert (multi.dataset, multi.n_images) == ("imagenet_multilabel", 5)
    assert (multi.acc_1crop, multi.acc_top_k, multi.acc_max) == (20.0, 40.0, 60.0)
    in_m = analyze_predictions(
        predictions, VAL_RECORDS, top_k=1, label_set="imagenet_m", labels_path=tmp_path / "l.parquet"
    ).metrics
    # images 2 (151 only unclear: correct here), 3 (problematic, counted) and 5 (409 is wrong; 530 at (224, 0, 0))
    assert (in_m.dataset, in_m.n_images) == ("imagenet_imagenet_m", 3)
    assert (in_m.acc_1crop, in_m.acc_max) == pytest.approx((200 / 3, 100.0))


def read_csv(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_every_table_cell_by_hand(tmp_path):
    scores = table_scores(tmp_path)
    write_table_multilabel(
        scores, {"imagenet": "imagenet_val", "v2": "imagenet_v2"}, tmp_path / "t.csv", tmp_path / "t.md"
    )
    rows = read_csv(tmp_path / "t.csv")
    assert list(rows[0]) == [*COLUMNS, "n_bad", "n_unscored", "left_out"]
    unscored = "not scored (not annotated by Shankar et al., or problematic)"
    assert [(r["n_bad"], r["n_unscored"], r["left_out"]) for r in rows] == [
        ("1", "2", f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='imagenet')}) and 2 {unscored}"),
        ("0", "1", f"1 {unscored}"),
    ]  # val: 7 images, 5 scored (one problematic, one not annotated); V2: c is not annotated
    rows = [{k: v for k, v in r.items() if k in COLUMNS} for r in rows]
    # val, scored images 1, 2, 5, 6, 7: top-1 only 2 (151); top-5 1, 2, 5 (6's 1 and 7's 0 are not in theirs);
    # multi-label only 1; ImageNet-M 2 and 3 of 2, 3, 5. Slices (original label): organisms 1, 2, 6, 7 (1 right);
    # objects 5; no dogs 1, 5, 6, 7
    assert rows[0] == {
        "model": "m",
        "dataset": "imagenet",
        "n_images": "7",
        "n_annotated": "6",
        "n_problematic": "1",
        "n_scored": "5",
        "acc_top1": "20.00",
        "acc_top5": "60.00",
        "acc_multilabel": "20.00",
        "acc_multilabel_top_k": "40.00",
        "acc_multilabel_max": "60.00",
        "n_imagenet_m": "3",
        "acc_imagenet_m": "66.67",
        "n_objects": "1",
        "acc_objects": "0.00",
        "n_organisms": "4",
        "acc_organisms": "25.00",
        "n_no_dogs": "4",
        "acc_no_dogs": "25.00",
        "notes": "",
        "n_scales": "2",
    }
    # V2, scored a (0, right) and b (409; 530 is judged correct too): c is not annotated
    assert rows[1] == {
        "model": "m",
        "dataset": "v2",
        "n_images": "3",
        "n_annotated": "2",
        "n_problematic": "0",
        "n_scored": "2",
        "acc_top1": "50.00",
        "acc_top5": "100.00",
        "acc_multilabel": "100.00",
        "acc_multilabel_top_k": "100.00",
        "acc_multilabel_max": "100.00",
        "n_imagenet_m": "0",
        "acc_imagenet_m": "",
        "n_objects": "1",
        "acc_objects": "100.00",
        "n_organisms": "1",
        "acc_organisms": "100.00",
        "n_no_dogs": "2",
        "acc_no_dogs": "100.00",
        "notes": NO_IMAGENET_M,
        "n_scales": "2",
    }
    md = (tmp_path / "t.md").read_text()
    assert "n_scales: the scales searched (2)." in md
    assert f"v2: 1 {unscored}." in md
    assert "| multi-label - top-1 | imagenet | +0.00 (median of 1 model) | +8.9 (median of 72 models" in md
    assert "| top-5 - multi-label | imagenet | +40.00 (median of 1 model) | +7.4" in md
    assert "| multi-label - top-1 | v2 | +50.00 (median of 1 model) | (reported for ImageNet val only) |" in md
    drop = "| multi-label drop, val -> V2 | imagenet -> v2 | -80.00 (median of 1 model), from -80.00 to -80.00 | 5 to 8"
    assert drop in md


def test_the_markdown_gives_each_accuracy_its_wilson_interval_over_its_own_images(tmp_path):
    write_table_multilabel(
        table_scores(tmp_path), {"imagenet": "imagenet_val", "v2": "imagenet_v2"}, tmp_path / "t.csv", tmp_path / "t.md"
    )
    val_row = next(line for line in (tmp_path / "t.md").read_text().splitlines() if line.startswith("| m | imagenet"))
    cells = val_row.strip("| ").split(" | ")[:19]
    # over n_scored = 5: top-1 1, top-5 3, multi-label 1, top_k 2, max 3; ImageNet-M 2 of its 3; objects 0 of 1,
    # organisms and no_dogs 1 of 4 (the counts of test_every_table_cell_by_hand)
    assert cells[6:11] == [
        "20.00 [3.62, 62.45]",
        "60.00 [23.07, 88.24]",
        "20.00 [3.62, 62.45]",
        "40.00 [11.76, 76.93]",
        "60.00 [23.07, 88.24]",
    ]
    assert cells[11:] == [
        "3",
        "66.67 [20.77, 93.85]",
        "1",
        "0.00 [0.00, 79.35]",
        "4",
        "25.00 [4.56, 69.94]",
        "4",
        "25.00 [4.56, 69.94]",
    ]
    assert cells[6:] == [
        *(wilson(k, 5) for k in (1, 3, 1, 2, 3)),
        "3",
        wilson(2, 3),
        "1",
        wilson(0, 1),
        "4",
        wilson(1, 4),
        "4",
        wilson(1, 4),
    ]
    assert read_csv(tmp_path / "t.csv")[0]["acc_top1"] == "20.00"  # the CSV keeps plain numbers


def test_the_summary_takes_medians_over_models(tmp_path):
    val, v2 = table_scores(tmp_path)
    # three models: multi-label 20, 30, 60 on val and 100, 10, 50 on V2 (top-1 20 / 50 and top-5 60 / 100 each)
    scores = [
        val,
        v2,
        *(
            replace(s, model=m, acc_multilabel=a)
            for m, s, a in [("n", val, 30.0), ("n", v2, 10.0), ("o", val, 60.0), ("o", v2, 50.0)]
        ),
    ]
    rows = summary(scores, {"imagenet": "imagenet_val", "v2": "imagenet_v2"})
    assert [row[2] for row in rows] == [
        "+10.00 (median of 3 models)",  # 0, 10, 40
        "+30.00 (median of 3 models)",  # 40, 30, 0
        "+0.00 (median of 3 models)",  # 50, -40, 0
        "+50.00 (median of 3 models)",  # 0, 90, 50
        "+10.00 (median of 3 models), from -80.00 to 20.00",  # val - V2: -80, 20, 10
    ]


def test_without_top5_the_table_says_so(tmp_path):
    scores = table_scores(tmp_path, top5=False)
    write_table_multilabel(
        scores, {"imagenet": "imagenet_val", "v2": "imagenet_v2"}, tmp_path / "t.csv", tmp_path / "t.md"
    )
    rows = read_csv(tmp_path / "t.csv")
    assert [(r["acc_top5"], r["notes"]) for r in rows] == [("", NO_TOP5), ("", f"{NO_TOP5}; {NO_IMAGENET_M}")]
    md = (tmp_path / "t.md").read_text()
    assert "| top-5 - multi-label | imagenet | the predictions were stored without top5" in md


def test_a_stale_analysis_is_refused(tmp_path):
    (val, _), records = table_scores(tmp_path), VAL_RECORDS
    labels = read_dataset_labels(tmp_path / "imagenet.parquet")
    predictions = tmp_path / "imagenet.m.predictions.parquet"
    analysis = analyze_predictions(
        predictions, records, top_k=1, label_set="multilabel", labels_path=tmp_path / "imagenet.parquet"
    ).metrics
    stale = replace(analysis, acc_1crop=40.0)
    with pytest.raises(ValueError, match="multi-label 1-crop accuracy 20.0 over 5 images here, 40.0 over 5 in its"):
        score("imagenet", one_crop_predictions(predictions), records, labels, val.coverage, class_groups(), stale)


VAL_ENTRY = {
    "adapter": "imagenet_val",
    "images": ".",
    "annotations": ".",
    "class_set": "full",
    "variants": ["original"],
    "label_sets": ["in", "multilabel", "imagenet_m"],
}
MODELS = {
    "m": {"source": "embedded", "architecture": "tf_efficientnet_lite0", "weights": "efficientnet-lite0-57934424.pth"}
}


def config(**datasets):
    return {"scales": [256], "datasets": datasets, "models": MODELS, "multilabel": {"path": "/nonexistent.json"}}


@pytest.mark.parametrize(
    "datasets, message",
    [
        (
            {"a": {"adapter": "imagenet_a", "root": ".", "label_sets": ["multilabel"]}},
            r"datasets.a.label_sets\[0\]: multilabel needs Shankar .* imagenet_val, imagenet_v2 only, not 'imagenet_a'",
        ),
        (
            {"v2": {"adapter": "imagenet_v2", "root": ".", "label_sets": ["in", "imagenet_m"]}},
            r"datasets.v2.label_sets\[1\]: imagenet_m needs .* of adapter\(s\) imagenet_val only, not 'imagenet_v2'",
        ),
        ({"v2": {"adapter": "imagenet_v2", "root": ".", "label_sets": ["real"]}}, "needs ImageNet-ReaL labels"),
        ({"v": {**VAL_ENTRY, "class_set": "subset"}}, "datasets.v.class_set: label set multilabel needs class_set"),
        ({"v": {**VAL_ENTRY, "variants": ["bgset"]}}, "datasets.v.variants: the multi-label table reads the original"),
    ],
)
def test_config_refuses_label_sets_the_dataset_cannot_carry(datasets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(config(**datasets), check_paths=False)


def test_config_needs_the_one_crop_scale_and_an_existing_local_file():
    with pytest.raises(ConfigError, match="scales: the multi-label table of datasets.v compares 1-crop accuracies"):
        load_config({**config(v=VAL_ENTRY), "scales": [224]}, check_paths=False)
    with pytest.raises(ConfigError, match="multilabel: '/nonexistent.json' does not exist"):
        load_config(config(v={**VAL_ENTRY, "images": "/", "annotations": "/"}), check_paths=True)
    with pytest.raises(ConfigError, match=r"^multilabel: .* \(Shankar et al.'s .* \(no Hugging Face source\)\)"):
        load_config({**config(v=VAL_ENTRY), "multilabel": {"hf": "a/b"}}, check_paths=False)
    # unused, the annotations are neither checked nor fetched
    assert load_config({**config(), "datasets": {"v": {**VAL_ENTRY, "label_sets": ["in"]}}}, check_paths=True)


def test_the_papers_config_scores_val_and_v2_with_the_published_file():
    from tests.conftest import ROOT
    from zoomeval.datasets.inputs import plan_all

    paper = load_config(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text()), check_paths=False)
    assert paper.datasets["imagenet"].label_sets == ("in", "real", "in_real", "multilabel", "imagenet_m")
    assert paper.datasets["imagenet_v2"].label_sets == ("in", "multilabel")
    assert paper.inference.store_top5 is True
    assert paper.multilabel == MULTILABEL_ANNOTATIONS
    assert MULTILABEL_ANNOTATIONS.to_config() == {
        "url": "https://storage.googleapis.com/brain-car-datasets/imagenet-mistakes/human_accuracy_v3.0.0.json",
        "sha256": "d5b2b6111fc9efea16aaebd21bc5a401d16ad18285d3fd99635d8b32ebdb6287",
    }
    # downloaded by a fetch_url job, with its sha256, under the resources root
    fetched = plan_all(paper)["labels", "multilabel"]
    assert (fetched.fetched, fetched.key) == ("resources/labels/human_accuracy_v3.0.0.json", "multilabel")
