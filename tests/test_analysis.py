"""Table A8 cells recomputed by hand from a small prediction file."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
import scipy
from scipy.stats import binomtest

from zoomeval.analysis.cover_breakdown import zoom_groups
from zoomeval.analysis.label_sets import LABEL_SETS, relabel, scored_name
from zoomeval.analysis.matrix import correctness_matrix, read_geometry, read_matrix
from zoomeval.analysis.metrics import METRICS_KEYS, METRICS_SCHEMA_VERSION, read_greedy, read_metrics
from zoomeval.analysis.scoring import analyze, analyze_predictions, write_analysis
from zoomeval.core.io import write_parquet
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.tables import BASE_FIELDS
from zoomeval.report.tables import write_table_a8

SCALES = [224, 256]
RECORDS = [
    Record("a", "a.png", [5], ["x"], 10, 10),
    Record("b", "b.png", [7, 9], ["y", "z"], 10, 10),  # two labels: either is correct
    Record("c", "c.png", [3], ["w"], 10, 10),  # never correct
]
# (image, scale, row, col) -> prediction; every other pair predicts class 0 (wrong for all images)
HITS = {("a", 256, 1, 1): 5, ("a", 224, 0, 0): 5, ("b", 224, 2, 2): 9, ("b", 256, 2, 2): 4}


def prediction_table(rows, preds):
    """A prediction file's default columns for (image_id, transform) rows and their predictions."""
    return pa.table(
        {
            "image_id": pa.array([i for i, _ in rows]).dictionary_encode(),
            "scale": pa.array([t.scale for _, t in rows], pa.int16()),
            "row": pa.array([t.row for _, t in rows], pa.int8()),
            "col": pa.array([t.col for _, t in rows], pa.int8()),
            "pred": pa.array(preds, pa.int16()),
            "pred_full": pa.array(preds, pa.int16()),
            "conf": pa.array(np.full(len(rows), 0.5), pa.float32()),
        },
        schema=pa.schema(BASE_FIELDS),
    )


def write_predictions(path, records=RECORDS, drop=0):
    rows = [(r.image_id, t) for r in records for t in transforms(SCALES)][drop:]
    preds = [HITS.get((i, t.scale, t.row, t.col), 0) for i, t in rows]
    meta = {
        "model": {"name": "m"},
        "variant": "original",
        "dataset": "toy",
        "scales": SCALES,
        "class_set": "full",
        "crop_size": 224,
    }
    write_parquet(path, prediction_table(rows, preds), meta)


def metrics_key(metrics):
    """The digest of a result's comparability key, as Table A8's key_sha256 shows it."""
    return hashlib.sha256(json.dumps(metrics.key, sort_keys=True).encode()).hexdigest()


def test_table_a8_cells_by_hand(tmp_path):
    write_predictions(tmp_path / "p.parquet")
    analysis = analyze_predictions(tmp_path / "p.parquet", RECORDS, top_k=1)
    metrics, cover = analysis.metrics, analysis.cover
    # 1-crop (256, centre): only a -> 1/3; any transform: a and b -> 2/3
    assert metrics.acc_1crop == pytest.approx(100 / 3)
    assert metrics.acc_max == pytest.approx(200 / 3)
    # greedy: LOC:0_0_Size:224 (a) comes first in the authors' order, then LOC:2_2_Size:224 (b)
    assert [c["transform"] for c in cover["greedy"]] == ["LOC:0_0_Size:224", "LOC:2_2_Size:224"]
    assert [(c["gain"], c["covered"]) for c in cover["greedy"]] == [(1, 1), (1, 2)]
    assert metrics.cover_size == 2 and metrics.cover_size_exact == 2 and metrics.cover_gap == 0
    assert cover["exact"]["status"] == "optimal" and len(cover["exact"]["transforms"]) == 2
    assert metrics.acc_top_k == pytest.approx(100 / 3) and metrics.top_k == 1  # top_k = 1: only the first pick
    write_table_a8([metrics], tmp_path / "t.csv", tmp_path / "t.md")
    key = metrics_key(metrics)
    assert (tmp_path / "t.csv").read_text() == (
        "model,variant,dataset,n_images,acc_1crop,acc_top_k,acc_max,cover_size,cover_size_exact,cover_gap,acc_standard,"
        "architecture,n_scales,n_bad,n_unscored,left_out,key_sha256\n"
        f"m,original,toy,3,33.33,33.33,66.67,2,2,0,,,2,0,0,none,{key}\n"  # no standard evaluation nor arch.tag: empty
    )
    assert f"| none | {key[:12]} |" in (tmp_path / "t.md").read_text()
    # 1 and 2 of 3 images, with their Wilson intervals (scipy: binomtest(1, 3).proportion_ci(method="wilson"))
    ci = [binomtest(k, 3).proportion_ci(method="wilson") for k in (1, 2)]
    one, two = (f"{100 * k / 3:.2f} [{100 * c.low:.2f}, {100 * c.high:.2f}]" for k, c in zip((1, 2), ci, strict=True))
    assert one == "33.33 [6.15, 79.23]"
    markdown = (tmp_path / "t.md").read_text()
    assert f"| m | original | toy | 3 | {one} | {one} | {two} | 2 | 2 | 0 |  |  | 2 |" in markdown


def test_missing_predictions_are_an_error_not_a_dropped_image(tmp_path):
    write_predictions(tmp_path / "p.parquet", drop=1)
    with pytest.raises(ValueError, match="53 .* of the expected 18 x 3"):
        analyze_predictions(tmp_path / "p.parquet", RECORDS)


def test_real_and_in_plus_real_scoring_by_hand(tmp_path):
    records = [
        Record("a", "a.png", [5], ["x"], 10, 10, real_labels=[5, 6]),
        Record("b", "b.png", [7], ["y"], 10, 10, real_labels=[]),  # ReaL: no valid label -> left out of ReaL
        Record("c", "c.png", [3], ["z"], 10, 10, real_labels=[4]),
    ]
    one_crop = {"a": 6, "b": 7, "c": 3}  # every other transform predicts 0, correct for nobody
    rows = [(r.image_id, t) for r in records for t in transforms([256])]
    preds = [one_crop[i] if (t.row, t.col) == (1, 1) else 0 for i, t in rows]
    table = prediction_table(rows, preds)
    meta = {
        "model": {"name": "m"},
        "variant": "original",
        "dataset": "imagenet",
        "scales": [256],
        "class_set": "full",
        "crop_size": 224,
    }
    write_parquet(tmp_path / "p.parquet", table, meta)
    expected = {
        "in": ("imagenet", 3, 200 / 3),
        "real": ("imagenet_real", 2, 50.0),
        "in_real": ("imagenet_in_real", 3, 100.0),
    }
    for label_set, (name, n, acc) in expected.items():
        metrics = analyze_predictions(tmp_path / "p.parquet", records, label_set=label_set).metrics
        assert (metrics.dataset, metrics.n_images) == (name, n), label_set
        assert metrics.acc_1crop == pytest.approx(acc) and metrics.acc_max == pytest.approx(acc), label_set
    with pytest.raises(ValueError, match="needs ImageNet-ReaL labels"):
        analyze_predictions(tmp_path / "p.parquet", RECORDS, label_set="real")


def test_the_correctness_matrix_round_trips_bit_packed(tmp_path):
    write_predictions(tmp_path / "p.parquet")
    analysis = analyze_predictions(tmp_path / "p.parquet", RECORDS)
    write_analysis(analysis, tmp_path / "metrics.json", tmp_path / "cover.json", tmp_path / "m.npz")
    matrix, order, ids = read_matrix(tmp_path / "m.npz")
    assert order == transforms(SCALES) and ids == ["a", "b", "c"] and matrix.shape == (18, 3)
    hits = {(order[t].name, ids[i]) for t, i in zip(*np.nonzero(matrix), strict=True)}
    assert hits == {("LOC:1_1_Size:256", "a"), ("LOC:0_0_Size:224", "a"), ("LOC:2_2_Size:224", "b")}
    sizes, crop_size = read_geometry(tmp_path / "m.npz")
    assert sizes.tolist() == [[10, 10]] * 3 and crop_size == 224


def test_the_matrix_is_read_in_batches_from_dictionary_or_plain_ids_and_ignores_other_images(tmp_path):
    extra = Record("z", "z.png", [5], ["x"], 10, 10)  # predicted but not in the scored records: ignored
    rows = [(r.image_id, t) for r in [*RECORDS, extra] for t in transforms(SCALES)][::-1]  # any row order
    preds = [HITS.get((i, t.scale, t.row, t.col), 5 if i == "z" else 0) for i, t in rows]
    table = prediction_table(rows, preds)
    write_parquet(tmp_path / "dict.parquet", table, {})
    write_parquet(tmp_path / "plain.parquet", table.set_column(0, "image_id", table["image_id"].cast(pa.string())), {})
    expected = np.zeros((18, 3), dtype=bool)
    for (i, scale, row, col), pred in HITS.items():
        k = [r.image_id for r in RECORDS].index(i)
        expected[transforms(SCALES).index(Transform(scale, row, col)), k] = pred in RECORDS[k].labels
    for name in ("dict", "plain"):
        for batch_rows in (5, 1 << 20):
            matrix = correctness_matrix(tmp_path / f"{name}.parquet", RECORDS, transforms(SCALES), batch_rows)
            assert (matrix == expected).all(), (name, batch_rows)
    write_parquet(tmp_path / "twice.parquet", pa.concat_tables([table, table.slice(table.num_rows - 1)]), {})
    with pytest.raises(ValueError, match="cover 55 .* of the expected 18 x 3"):  # a pair predicted twice
        correctness_matrix(tmp_path / "twice.parquet", RECORDS, transforms(SCALES), 7)


def test_zoom_groups_use_the_models_own_cover_by_hand():
    order = transforms([64, 224, 256])
    m = np.zeros((27, 4), dtype=bool)
    t = {(s): order.index(Transform(s, 0, 0)) for s in (64, 224, 256)}
    m[t[64], 1] = True  # zoom-out solves image 1
    m[t[224], 2] = True  # zoom-224 solves image 2
    m[t[256], [0, 1]] = True  # zoom-in solves images 0 and 1; image 3 is never solved
    scores, _ = analyze(m, order)
    # greedy: LOC:0_0_Size:256 (2 images), then LOC:0_0_Size:224; the zoom-out transform is not in the cover
    assert scores.zoom_groups == {
        "ub_in": 50.0,
        "excl_in": 50.0,
        "ub_out": 0.0,
        "excl_out": 0.0,
        "ub_224": 25.0,
        "excl_224": 25.0,
    }
    assert scores.top_k_centre_share == 0.0  # both picks sit at anchor (0, 0)
    with_out = zoom_groups(m, order, [t[256], t[224], t[64]])
    assert (with_out["ub_out"], with_out["excl_in"], with_out["excl_out"]) == (25.0, 25.0, 0.0)


def write_standard(path, preds):
    """A standard-evaluation file: one prediction per image (image order shuffled, as it may be)."""
    ids = list(preds)[::-1]
    write_parquet(path, pa.table({"image_id": ids, "pred": pa.array([preds[i] for i in ids], pa.int16())}), {})


def test_standard_accuracy_overall_and_by_origin_by_hand(tmp_path):
    write_predictions(tmp_path / "p.parquet")
    # a: correct; b: 7 is its other label, correct; c: wrong -> 2/3; by origin: x = {a, c} -> 1/2, y = {b} -> 1/1
    write_standard(tmp_path / "s.parquet", {"a": 5, "b": 7, "c": 5})
    records = [replace(r, origin=o) for r, o in zip(RECORDS, "xyx", strict=True)]
    analysis = analyze_predictions(tmp_path / "p.parquet", records, top_k=1, standard_path=tmp_path / "s.parquet")
    metrics = analysis.metrics
    assert metrics.acc_standard == pytest.approx(200 / 3)
    assert {o: v["acc_standard"] for o, v in metrics.by_origin.items()} == {"x": 50.0, "y": 100.0}
    assert metrics.by_origin["x"]["acc_1crop"] == 50.0  # a is right at LOC:1_1_Size:256, c is not
    write_table_a8([metrics], tmp_path / "t.csv", tmp_path / "t.md")
    row = (tmp_path / "t.csv").read_text().splitlines()[1]
    assert row == f"m,original,toy,3,33.33,33.33,66.67,2,2,0,66.67,,2,0,0,none,{metrics_key(metrics)}"
    # a file that misses an image of the manifest is refused
    write_standard(tmp_path / "short.parquet", {"a": 5, "b": 7})
    with pytest.raises(ValueError, match="cover 2 of the 3 images.*--forcerun standard_eval"):
        analyze_predictions(tmp_path / "p.parquet", records, standard_path=tmp_path / "short.parquet")


def test_metrics_and_cover_files_round_trip_with_the_schema_version(tmp_path):
    write_predictions(tmp_path / "p.parquet")
    analysis = analyze_predictions(tmp_path / "p.parquet", RECORDS, top_k=1, n_excluded=2, bad={"unreadable": 2})
    write_analysis(analysis, tmp_path / "metrics.json", tmp_path / "cover.json", tmp_path / "m.npz")
    document = json.loads((tmp_path / "metrics.json").read_text())
    assert list(document) == ["schema_version", *METRICS_KEYS]
    assert document["schema_version"] == METRICS_SCHEMA_VERSION == 6
    # what it was computed from: the prediction file's sha256 and the comparability key
    digest = hashlib.sha256((tmp_path / "p.parquet").read_bytes()).hexdigest()
    assert document["inputs"] == {
        "predictions": {"path": str(tmp_path / "p.parquet"), "sha256": digest},
        "standard": None,
    }
    images = hashlib.sha256(b'[["a", [5]], ["b", [7, 9]], ["c", [3]]]').hexdigest()
    assert document["key"] == {
        "dataset": "toy",
        "images": images,
        "class_set": "full",
        "label_set": "in",
        "variant": "original",
        "scales": SCALES,
        "anchors": 9,
        "resize_backend": None,
        "model": None,
        "weights_sha256": None,
        "input_size": 224,
        "mean": None,
        "std": None,
        "precision": None,
        "compile": None,
        "channels_last": None,
        "top_k": 1,
        "zoomeval": None,
        "zoomeval_commit": None,
        "cover_node_limit": 1000,
        "revisions": None,
    }
    assert document["left_out"] == {"dataset": "toy", "bad": {"unreadable": 2}, "unscored": {}}
    assert (document["top_k"], document["n_excluded"], document["acc_top_k"]) == (1, 2, pytest.approx(100 / 3))
    assert read_metrics(tmp_path / "metrics.json") == analysis.metrics
    cover = json.loads((tmp_path / "cover.json").read_text())
    assert list(cover) == ["schema_version", *METRICS_KEYS, "greedy", "exact"]
    assert read_metrics(tmp_path / "cover.json") == analysis.metrics
    assert read_greedy(tmp_path / "cover.json") == [Transform(224, 0, 0), Transform(224, 2, 2)]
    exact = cover["exact"]  # what stopped the search, and which solver: one matrix, one cover under one HiGHS
    assert (exact["status"], exact["node_limit"], exact["time_limit"]) == ("optimal", 1000, 1800.0)
    assert isinstance(exact["nodes"], int) and exact["solver"] == f"HiGHS in scipy {scipy.__version__}"


def test_version_1_metrics_files_are_read_with_acc_top36_renamed(tmp_path):
    write_predictions(tmp_path / "p.parquet")
    metrics = analyze_predictions(tmp_path / "p.parquet", RECORDS, top_k=1).metrics
    version_3 = {k: v for k, v in vars(metrics).items() if k != "left_out"}
    old = {("acc_top36" if k == "acc_top_k" else k): v for k, v in version_3.items()}  # no schema_version
    (tmp_path / "old.json").write_text(json.dumps(old))
    unrecorded = replace(metrics, left_out=None)  # a table says it was not recorded
    assert read_metrics(tmp_path / "old.json") == unrecorded
    version_2 = {k: v for k, v in version_3.items() if k != "acc_standard"}
    (tmp_path / "v2.json").write_text(json.dumps({**version_2, "schema_version": 2}))
    assert read_metrics(tmp_path / "v2.json") == unrecorded and metrics.acc_standard is None
    (tmp_path / "v3.json").write_text(json.dumps({**version_3, "schema_version": 3}))
    assert read_metrics(tmp_path / "v3.json") == unrecorded
    (tmp_path / "new.json").write_text(json.dumps({**old, "schema_version": 7}))
    with pytest.raises(ValueError, match="schema_version 7 .* upgrade zoomeval"):
        read_metrics(tmp_path / "new.json")
    del old["n_classes"]
    (tmp_path / "partial.json").write_text(json.dumps(old))
    with pytest.raises(ValueError, match=r"partial.json: no \['n_classes'\]; re-run the analysis"):
        read_metrics(tmp_path / "partial.json")


def test_label_sets_registry_names_and_scored_names():
    assert list(LABEL_SETS) == ["in", "real", "in_real", "multilabel", "imagenet_m"]
    assert [LABEL_SETS[n].needs for n in LABEL_SETS] == [None, "real_labels", "real_labels", None, None]
    assert [LABEL_SETS[n].labels_file for n in LABEL_SETS] == [None] * 3 + ["multilabel.parquet"] * 2
    assert [scored_name("v", n) for n in LABEL_SETS] == ["v", "v_real", "v_in_real", "v_multilabel", "v_imagenet_m"]
    with pytest.raises(ValueError, match="unknown label set 'reall'"):
        scored_name("v", "reall")
    with pytest.raises(ValueError, match="unknown label set"):
        relabel(RECORDS, "reall")
    where = "labels/<dataset>/multilabel.parquet under the results root"  # the limited run's root too
    with pytest.raises(ValueError, match=f"'multilabel' reads Shankar et al.'s .* from {where}; give its path"):
        relabel(RECORDS, "multilabel")
    # a dataset whose records carry ReaL labels on some images only is scored; one without any is refused
    some = [replace(RECORDS[0], real_labels=[5]), *RECORDS[1:]]
    assert [r.labels for r in relabel(some, "real")] == [[5]]
    with pytest.raises(ValueError, match="'in_real' needs ImageNet-ReaL labels"):
        relabel(RECORDS, "in_real")
    # a label set that leaves no image would print an accuracy of 0 over nothing
    with pytest.raises(ValueError, match="label set 'real' leaves none of the dataset's 3 images to score"):
        relabel([replace(r, real_labels=[]) for r in RECORDS], "real")


def test_a_matrix_nothing_solves_scores_zero_with_an_undefined_centre_share():
    order = transforms([224, 256])
    scores, cover = analyze(np.zeros((18, 4), dtype=bool), order, top_k=3)
    assert (scores.acc_1crop, scores.acc_top_k, scores.acc_max) == (0.0, 0.0, 0.0)
    assert (scores.cover_size, scores.cover_size_exact, scores.top_k_centre_share) == (0, 0, None)
    assert cover["greedy"] == [] and cover["exact"]["status"] == "empty"
