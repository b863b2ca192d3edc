"""The multi-label table end to end: tiny ImageNet val and ImageNet-V2 folders, and annotations in the published
shape served from 127.0.0.1 and downloaded with their sha256."""

import csv
import hashlib
import json

import pyarrow.parquet as pq
import pytest

from tests.multilabel_fixture import document, v2_id, val
from tests.test_adapters import VAL, save_image, voc_xml
from tests.test_integrity_workflow import bad_note, truncated_jpeg
from tests.test_real_datasets_workflow import served  # noqa: F401 (a fixture)
from zoomeval.core.classes import wnids
from zoomeval.report.multilabel_table import NO_IMAGENET_M

pytestmark = pytest.mark.workflow

V2 = {f"0/{v2_id('a')}": 0, f"1/{v2_id('b')}": 1, f"2/{v2_id('c')}": 2}  # image id -> class index


def build_inputs(src, www):
    """Val images 1-3 (classes 0, 1, 999) with their bbox XMLs, three ImageNet-V2 images (classes 0, 1, 2) and the
    annotations. Every label list names all 1000 classes, so what the model predicts cannot change the multi-label
    and ImageNet-M results: val 1 is always right, val 2 (only unclear) always wrong for multi-label and right for
    ImageNet-M, val 3 problematic (left out of multi-label, counted in ImageNet-M); V2 a is always right, b always
    wrong, c not annotated, e a truncated JPEG (left out as bad). Returns the annotations' sha256."""
    for number, size, objects in VAL:
        stem = f"ILSVRC2012_val_{number:08d}"
        save_image(src / "val" / f"{stem}.JPEG", size)
        (src / "bbox" / "val").mkdir(parents=True, exist_ok=True)
        (src / "bbox" / "val" / f"{stem}.xml").write_text(voc_xml(stem, size, objects))
    for image_id in V2:
        save_image(src / "v2" / f"{image_id}.jpeg", (24, 20))
    (src / "v2" / "3").mkdir()
    (src / "v2" / "3" / f"{v2_id('e')}.jpeg").write_bytes(truncated_jpeg(4))  # a bad image, left out
    every = wnids()
    annotations = document(
        {
            val(1): {"correct": every},
            val(2): {"unclear": every},
            val(3): {"correct": every},
            v2_id("a"): {"correct": every},
            v2_id("b"): {"wrong": every},
        },
        problematic=[val(3)],
        imagenet_m=[val(2), val(3)],
    )
    data = json.dumps(annotations).encode()
    (www / "human_accuracy_v3.0.0.json").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


SCORED = ("imagenet_multilabel", "imagenet_imagenet_m", "imagenet_v2_multilabel")
METRICS = "results/analysis/{}/original/efficientnet_lite0/metrics.json"


def analysis(workdir, scored):
    metrics = json.loads((workdir / METRICS.format(scored)).read_text())
    return metrics["n_images"], metrics["acc_1crop"], metrics["acc_max"]


def read_rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def one_crop_accuracies(workdir, dataset):
    """Top-1 and top-5 accuracy (%) of the scored images (manifest order, all but val 3 and V2 c) from the file."""
    table = pq.read_table(workdir / f"results/predictions/{dataset}/original/efficientnet_lite0.parquet").to_pylist()
    manifest = pq.read_table(workdir / f"results/datasets/{dataset}/manifest.parquet").to_pylist()
    labels = {r["image_id"]: r["labels"][0] for r in manifest}
    rows = [r for r in table if (r["scale"], r["row"], r["col"]) == (256, 1, 1)]
    scored = [r for r in rows if r["image_id"] not in ("ILSVRC2012_val_00000003", f"2/{v2_id('c')}")]
    assert len(scored) == 2
    top1 = sum(r["pred"] == labels[r["image_id"]] for r in scored) * 50
    top5 = sum(labels[r["image_id"]] in r["top5"] for r in scored) * 50
    return f"{top1:.2f}", f"{top5:.2f}"


def test_the_multilabel_table_end_to_end(tmp_path, served, snakemake_run, config_writer):  # noqa: F811
    www, base = served
    src = tmp_path / "src"
    sha = build_inputs(src, www)
    config = config_writer(
        tmp_path,
        scales=[256],
        top_k=3,
        stats={"pairs": []},
        multilabel={"url": f"{base}/human_accuracy_v3.0.0.json", "sha256": sha},
        datasets={
            "imagenet": {
                "adapter": "imagenet_val",
                "images": str(src / "val"),
                "annotations": str(src / "bbox"),
                "variants": ["original"],
                "label_sets": ["in", "multilabel", "imagenet_m"],
            },
            "imagenet_v2": {"adapter": "imagenet_v2", "root": str(src / "v2"), "label_sets": ["in", "multilabel"]},
        },
        inference={"device": "cpu", "batch_size": 16, "num_workers": 0, "store_top5": True},
    )
    snakemake_run(tmp_path, "results/table_multilabel.csv", METRICS.format("imagenet_imagenet_m"))
    assert (tmp_path / "resources/labels/human_accuracy_v3.0.0.json").read_bytes() == (
        www / "human_accuracy_v3.0.0.json"
    ).read_bytes()
    val_row, v2_row = read_rows(tmp_path / "results/table_multilabel.csv")
    unscored = "not scored (not annotated by Shankar et al., or problematic)"
    assert [(r.pop("n_bad"), r.pop("n_unscored"), r.pop("left_out")) for r in (val_row, v2_row)] == [
        ("0", "1", f"1 {unscored}"),
        ("1", "1", f"{bad_note('imagenet_v2')} and 1 {unscored}"),
    ]
    assert (
        f"imagenet_v2: {bad_note('imagenet_v2')} and 1 {unscored}."
        in (tmp_path / "results/table_multilabel.md").read_text()
    )
    top1, top5 = one_crop_accuracies(tmp_path, "imagenet")
    assert val_row == {
        "model": "efficientnet_lite0",
        "dataset": "imagenet",
        "n_images": "3",
        "n_annotated": "3",
        "n_problematic": "1",
        "n_scored": "2",
        "acc_top1": top1,
        "acc_top5": top5,
        "acc_multilabel": "50.00",
        "acc_multilabel_top_k": "50.00",
        "acc_multilabel_max": "50.00",
        "n_imagenet_m": "2",
        "acc_imagenet_m": "100.00",
        "n_objects": "0",
        "acc_objects": "",
        "n_organisms": "2",
        "acc_organisms": "50.00",
        "n_no_dogs": "2",
        "acc_no_dogs": "50.00",
        "notes": "acc_objects: no image of this slice",
        "n_scales": "1",
    }
    top1, top5 = one_crop_accuracies(tmp_path, "imagenet_v2")
    assert v2_row == {
        "model": "efficientnet_lite0",
        "dataset": "imagenet_v2",
        "n_images": "3",
        "n_annotated": "2",
        "n_problematic": "0",
        "n_scored": "2",
        "acc_top1": top1,
        "acc_top5": top5,
        "acc_multilabel": "50.00",
        "acc_multilabel_top_k": "50.00",
        "acc_multilabel_max": "50.00",
        "n_imagenet_m": "0",
        "acc_imagenet_m": "",
        "n_objects": "0",
        "acc_objects": "",
        "n_organisms": "2",
        "acc_organisms": "50.00",
        "n_no_dogs": "2",
        "acc_no_dogs": "50.00",
        "notes": f"{NO_IMAGENET_M}; acc_objects: no image of this slice",
        "n_scales": "1",
    }
    # the label sets are scored by the analysis like any other (their Table A8 rows)
    assert {scored: analysis(tmp_path, scored) for scored in SCORED} == {
        "imagenet_multilabel": (2, 50.0, 50.0),
        "imagenet_imagenet_m": (2, 100.0, 100.0),
        "imagenet_v2_multilabel": (2, 50.0, 50.0),
    }
    assert (
        "| multi-label drop, val -> V2 | imagenet -> imagenet_v2 | +0.00 (median of 1 model)"
        in (tmp_path / "results/table_multilabel.md").read_text()
    )
    # the browser and the hard sets read the annotations too: val 2 and V2 b are never right under multi-label
    # labels (no label judged correct), every ImageNet-M image is right under correct + unclear
    snakemake_run(tmp_path, "results/browser/index.html", "results/hard/summary.csv")
    hard = {s: pq.read_table(tmp_path / f"results/hard/{s}.parquet").to_pylist() for s in SCORED}
    assert {s: [(r["image"]["path"], r["label"]) for r in rows] for s, rows in hard.items()} == {
        "imagenet_multilabel": [("ILSVRC2012_val_00000002.JPEG", [])],
        "imagenet_imagenet_m": [],
        "imagenet_v2_multilabel": [(f"1/{v2_id('b')}.jpeg", [])],
    }
    assert (tmp_path / "results/browser/data/imagenet_multilabel/index.js").exists()
    # `all` builds the table as well
    (tmp_path / "results/table_multilabel.csv").unlink()
    assert "rule table_multilabel:" in snakemake_run(tmp_path, "-n", "all").stdout
    # a local copy whose sha256 is not the pinned one is refused, naming the key
    config["multilabel"] = {"path": str(www / "human_accuracy_v3.0.0.json"), "sha256": "0" * 64}
    config_writer(tmp_path, **config)
    assert snakemake_run(tmp_path, "results/labels/imagenet/multilabel.parquet", check=False).returncode != 0
    log = (tmp_path / "logs/labels/imagenet.log").read_text()
    assert f"multilabel: {www / 'human_accuracy_v3.0.0.json'} has sha256 {sha}, not the config's {'0' * 64}" in log
