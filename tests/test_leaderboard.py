"""zoomeval leaderboard: tiny finished studies (manifest, predictions, standard evaluation, analysis and study index
written by the package's own writers) merged into one table. Every number is recomputed from the files by brute
force; what cannot be trusted (a half-finished study, tampered or malformed files) is refused naming the file;
rows rank together only where their evaluation protocols agree; cells are safe in every format."""

import contextlib
import csv
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import binomtest

from tests.chromium import CHROMIUM, Chromium
from zoomeval.analysis.comparability import FIELD_ROLES, KEY_FIELDS, MODEL_FIELDS, PROTOCOL_FIELDS
from zoomeval.analysis.exact_cover import DEFAULT_LIMITS, CoverLimits
from zoomeval.analysis.scoring import analyze_predictions, write_analysis
from zoomeval.analysis.stats import wilson_interval
from zoomeval.core.io import read_json, write_json, write_parquet
from zoomeval.core.layout import Layout, run_layout
from zoomeval.core.manifest import Record, write_manifest
from zoomeval.core.strict_yaml import load_yaml
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.tables import BASE_FIELDS
from zoomeval.publish.leaderboard import ACCURACIES, COLUMNS, HEADING, readable_architecture, study_rows
from zoomeval.study.index import write_index

LAYOUT = Layout()
N = 12
SCALES = [64, 224, 256]
#: image i has label i % 4 and, in the ReaL label set, also label 4
RECORDS = [Record(f"i{i:02d}", f"i{i:02d}.png", [i % 4], ["n"], 300, 300, real_labels=[i % 4, 4]) for i in range(N)]
META = {
    "kind": "predictions",
    "zoomeval": "0.1.0",
    "zoomeval_commit": "c0ffee",
    "torch": "2.14.1",
    "device": "cpu",
    "precision": "fp32",
    "resize_backend": "pil",
    "compile": False,
    "channels_last": False,
    "class_set": "full",
    "class_indices": None,
    "crop_size": 224,
    "n_images": N,
}
MODEL = {
    "name": "r50",
    "source": "timm",
    "architecture": "resnet50",
    "weights": "a1_in1k",
    "weights_sha256": "ab" * 32,
    "param_count": 25_557_032,
    "mean": [0.485, 0.456, 0.406],
    "std": [0.229, 0.224, 0.225],
}
GEOMETRY = {"img_size": 224, "crop_pct": 0.95, "interpolation": "bicubic"}


def hit(seed: int, i: int, t: Transform) -> bool:
    """Does transform ``t`` classify image ``i`` correctly, for model ``seed``? The 1-crop transform (256, centre)
    on every (3 + seed)-th image, a few others elsewhere, and never image 11 - seed."""
    if i == 11 - seed:
        return False
    if (t.scale, t.row, t.col) == (256, 1, 1):
        return (i + seed) % (3 + seed) == 0
    return (i * (3 * t.row + t.col + 1) + t.scale // 32 + seed) % 7 == 0


def study(
    folder: Path,
    model: str = "r50",
    seed: int = 0,
    scales=SCALES,
    dataset: str = "demo",
    label_sets=("in",),
    top_k: int = 3,
    records=RECORDS,
    meta=None,
    spec=None,
    variant: str = "original",
    layout: Layout = LAYOUT,
    limits: CoverLimits = DEFAULT_LIMITS,
) -> Path:
    """A finished study of one model: its files as the workflow writes them under ``layout``'s results root, the
    analysis run from the study directory (paths relative to it) and the study sealed by its index."""
    order = transforms(scales)
    files = {
        "manifest": layout.path("manifest", dataset=dataset),
        "predictions": layout.path("predictions", dataset=dataset, variant=variant, model=model),
        "standard": layout.path("standard", dataset=dataset, model=model),
    }
    write_manifest(folder / files["manifest"], records, dataset)
    rows = [(r, t) for r in records for t in order]
    preds = [r.labels[0] if hit(seed, int(r.image_id[1:]), t) else 999 for r, t in rows]
    table = pa.table(
        {
            "image_id": pa.array([r.image_id for r, _ in rows]).dictionary_encode(),
            "scale": pa.array([t.scale for _, t in rows], pa.int16()),
            "row": pa.array([t.row for _, t in rows], pa.int8()),
            "col": pa.array([t.col for _, t in rows], pa.int8()),
            "pred": pa.array(preds, pa.int16()),
            "pred_full": pa.array(preds, pa.int16()),
            "conf": pa.array([0.5] * len(rows), pa.float32()),
        },
        schema=pa.schema(BASE_FIELDS),
    )
    spec = {**MODEL, "name": model, **(spec or {})}
    metadata = {
        **META,
        "model": spec,
        "dataset": dataset,
        "variant": variant,
        "scales": scales,
        "n_images": len(records),
        **(meta or {}),
    }
    write_parquet(folder / files["predictions"], table, metadata)
    standard = [(r.labels[0] if int(r.image_id[1:]) % 3 == seed % 3 else 998) for r in records]
    top5 = [
        [p, 997, r.labels[0] if int(r.image_id[1:]) % 2 else 996, 995, 994]
        for p, r in zip(standard, records, strict=True)
    ]
    write_parquet(
        folder / files["standard"],
        pa.table(
            {
                "image_id": [r.image_id for r in records],
                "pred": pa.array(standard, pa.int16()),
                "top5": pa.array(top5, pa.list_(pa.int16())),
            }
        ),
        {"model": spec, "geometry": GEOMETRY},
    )
    metrics = []
    with contextlib.chdir(folder):
        for label_set in label_sets:
            scored = dataset if label_set == "in" else f"{dataset}_{label_set}"
            analysis = analyze_predictions(
                files["predictions"],
                records,
                top_k=top_k,
                label_set=label_set,
                limits=limits,
                standard_path=files["standard"] if variant == "original" else None,
            )
            out = {n: layout.path(n, scored=scored, variant=variant, model=model) for n in ("metrics", "cover")}
            write_analysis(
                analysis,
                out["metrics"],
                out["cover"],
                layout.path("correct", scored=scored, variant=variant, model=model),
            )
            metrics.append(out["metrics"])
    write_index(folder / layout.path("study_index"), folder, metrics)
    return folder


def brute_force(seed: int, scales=SCALES, records=RECORDS) -> dict[str, float]:
    """1-crop and any-transform accuracy, by looping over every (image, transform) pair."""
    order = transforms(scales)
    ids = [int(r.image_id[1:]) for r in records]
    one = sum(hit(seed, i, Transform(256, 1, 1)) for i in ids)
    return {
        "acc_1crop": 100 * one / len(ids),
        "acc_max": 100 * sum(any(hit(seed, i, t) for t in order) for i in ids) / len(ids),
    }


def reseal(folder: Path) -> None:
    """Rewrite the sha256 in a study's index over its current files (what a forger would do to get past the check)."""
    index = read_json(folder / LAYOUT.path("study_index"))
    for entry in index["results"]:
        entry["sha256"] = hashlib.sha256((folder / entry["path"]).read_bytes()).hexdigest()
    write_json(folder / LAYOUT.path("study_index"), index)


def edit_metrics(folder: Path, seal: bool = True, **values) -> Path:
    path = folder / LAYOUT.path("metrics", scored="demo", variant="original", model="r50")
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
    if seal:
        reseal(folder)
    return path


def zoomeval(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True, cwd=cwd)


def board(*args, cwd=None) -> list[dict[str, str]]:
    """The leaderboard of the studies ``args`` as CSV rows, written beside the first study (never into the checkout)."""
    out = Path(cwd or Path(args[0]).parent) / "board.csv"
    proc = zoomeval("leaderboard", *map(str, args), "-o", str(out), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as fh:
        return list(csv.DictReader(fh))


def refused(*args: str) -> str:
    """The one line of a refusal (exit 2, no traceback)."""
    proc = zoomeval("leaderboard", *map(str, args))
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr.strip()


def test_wilson_interval_by_hand_and_as_scipy_computes_it() -> None:
    # k = 5 of n = 12, z = 1.95996: centre (5 + z²/2) / (12 + z²) = 6.92073 / 15.84146 = 0.43688, half-width
    # z / (12 + z²) * sqrt(5 * 7 / 12 + z²/4) = 0.123723 * 1.969019 = 0.243613
    low, high = wilson_interval(5, 12)
    assert (round(low, 4), round(high, 4)) == (0.1933, 0.6805)
    assert [round(x, 4) for x in wilson_interval(3750, 7500)] == [0.4887, 0.5113]
    for k, n in [(0, 12), (12, 12), (1, 1), (7, 50), (49_000, 50_000)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(13, 12)


def test_every_number_is_recomputed_from_the_predictions_and_the_files_sha256(tmp_path) -> None:
    a = study(tmp_path / "a", label_sets=("in", "real"))
    study(tmp_path / "b", model="r18", seed=1)
    rows = board(tmp_path / "a", tmp_path / "b")
    assert list(rows[0]) == list(COLUMNS)
    # one group (the same key: model resnet50.a1_in1k for both), best 1-crop first: 4 of 12 (a) over 3 (b)
    assert [brute_force(s)["acc_1crop"] for s in (0, 1)] == [100 * 4 / 12, 100 * 3 / 12]
    assert [(r["study"], r["model"], r["label_set"]) for r in rows] == [
        ("a", "r50", "in"),
        ("b", "r18", "in"),
        ("a", "r50", "real"),
    ]
    for row in rows[:2]:
        expected = brute_force(0 if row["model"] == "r50" else 1)
        assert row["acc_1crop"] == f"{expected['acc_1crop']:.2f}" and row["acc_max"] == f"{expected['acc_max']:.2f}"
        # the standard evaluation is right on the images i with i % 3 == seed % 3: 4 of 12
        assert row["acc_standard"] == "33.33"
        for column in ACCURACIES:
            k = round(float(row[column]) * N / 100)
            ci = binomtest(k, N).proportion_ci(method="wilson")
            assert (row[f"{column}_lo"], row[f"{column}_hi"]) == (f"{100 * ci.low:.2f}", f"{100 * ci.high:.2f}")
        assert (row["param_count"], row["img_size"], row["crop_pct"], row["interpolation"]) == (
            "25.56",
            "224",
            "0.95",
            "bicubic",
        )
        assert (row["mean"], row["std"], row["class_set"]) == ("[0.485, 0.456, 0.406]", "[0.229, 0.224, 0.225]", "full")
    real = rows[2]  # under ReaL every image also has label 4, which no transform predicts: the same hits
    assert real["acc_1crop"] == rows[0]["acc_1crop"] and real["group"].startswith("demo / original / real: 12 images")
    predictions = a / LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    metrics = a / LAYOUT.path("metrics", scored="demo", variant="original", model="r50")
    assert rows[0]["predictions_sha256"] == hashlib.sha256(predictions.read_bytes()).hexdigest()
    assert rows[0]["metrics_sha256"] == hashlib.sha256(metrics.read_bytes()).hexdigest()
    assert zoomeval("leaderboard", str(a), str(tmp_path / "b"), "--verify").returncode == 0


def test_two_studies_of_one_config_are_one_group_with_the_same_numbers(tmp_path) -> None:
    rows = board(study(tmp_path / "a"), study(tmp_path / "b"))
    assert len({r["group"] for r in rows}) == 1 and len({r["key_sha256"] for r in rows}) == 1
    numbers = ["acc_standard", "acc_1crop", "acc_top_k", "acc_max", "cover_size", "cover_size_exact"]
    assert [r[c] for c in numbers for r in rows[:1]] == [r[c] for c in numbers for r in rows[1:]]
    assert [(r["study"], r["note"]) for r in rows] == [
        ("a", "same numbers as study b"),
        ("b", "same numbers as study a"),
    ]


#: one change of each comparability-key field (anchors: the 3 x 3 grid is fixed in the code, so no study differs)
CHANGES = {
    "dataset": {"dataset": "demo2"},
    "images": {"records": RECORDS[:-1]},
    "class_set": {"meta": {"class_set": "subset", "class_indices": [0, 1, 2, 3]}},
    "label_set": {"label_sets": ("real",)},
    "scales": {"scales": [64, 256]},
    "resize_backend": {"meta": {"resize_backend": "torch"}},
    "model": {"spec": {"architecture": "resnet18"}},
    "weights_sha256": {"spec": {"weights_sha256": "cd" * 32}},
    "input_size": {"meta": {"crop_size": 256}},
    "mean": {"spec": {"mean": [0.5, 0.5, 0.5]}},
    "std": {"spec": {"std": [0.5, 0.5, 0.5]}},
    "precision": {"meta": {"precision": "bf16"}},
    "compile": {"meta": {"compile": True}},
    "channels_last": {"meta": {"channels_last": True}},
    "top_k": {"top_k": 2},
    "variant": {"variant": "fg"},
    "zoomeval": {"meta": {"zoomeval": "0.2.0"}},
    "zoomeval_commit": {"meta": {"zoomeval_commit": "bad"}},
    "cover_node_limit": {"limits": CoverLimits(nodes=7)},
    "revisions": {"meta": {"dataset_revisions": {"parquet": "taesiri/imagenet-hard@" + "5c" * 20}}},
}


def test_every_key_field_has_one_role_and_the_roles_split_the_key() -> None:
    assert set(FIELD_ROLES) == set(KEY_FIELDS) and set(FIELD_ROLES.values()) == {"protocol", "model", "provenance"}
    assert [f for f in KEY_FIELDS if FIELD_ROLES[f] == "provenance"] == ["zoomeval_commit"]
    assert set(PROTOCOL_FIELDS) | set(MODEL_FIELDS) | {"zoomeval_commit"} == set(KEY_FIELDS)


@pytest.mark.parametrize("field", [f for f in PROTOCOL_FIELDS if f != "anchors"])
def test_changing_a_protocol_field_separates_the_tables_and_the_note_names_it(tmp_path, field) -> None:
    assert set(CHANGES) == set(KEY_FIELDS) - {"anchors"}
    rows = board(study(tmp_path / "a"), study(tmp_path / "b", **CHANGES[field]))
    assert len({r["key_sha256"] for r in rows}) == 2 and len({r["group"] for r in rows}) == 2
    (a,) = [r for r in rows if r["study"] == "a"]
    (b,) = [r for r in rows if r["study"] == "b"]
    if field in HEADING:  # the heading names the field: demo / original / in
        assert b["note"] == ""
        return
    note = b["note"].removeprefix("kept apart from the rows with ")
    assert note.split(" ")[0] == field or f", {field} " in note, b["note"]


@pytest.mark.parametrize("field", [f for f in KEY_FIELDS if FIELD_ROLES[f] != "protocol"])
def test_a_model_setting_or_the_commit_keeps_one_table_the_setting_in_its_column(tmp_path, field) -> None:
    """Two models (seeds 0 and 1, another name) on one protocol: one table, both rows, the better acc_max first;
    the setting that differs is the row's own (its key, and its column where the board has one)."""
    rows = board(study(tmp_path / "a"), study(tmp_path / "b", model="r18", seed=1, **CHANGES[field]))
    assert len({r["group"] for r in rows}) == 1 and len({r["key_sha256"] for r in rows}) == 2
    expected = sorted(("a", "b"), key=lambda name: -brute_force(0 if name == "a" else 1)["acc_max"])
    assert [r["study"] for r in rows] == expected and [r["note"] for r in rows] == ["", ""]
    columns = {"model": "architecture", "input_size": "img_size", "zoomeval_commit": "zoomeval_commit"}
    column = columns.get(field, field)
    if column in rows[0]:
        assert rows[0][column] != rows[1][column]


def test_a_commit_later_merges_and_another_release_stays_apart_in_words(tmp_path) -> None:
    """The zoomeval release is protocol (a change that alters numbers gets a new one), the commit provenance."""
    rows = board(
        study(tmp_path / "early"),
        study(tmp_path / "later", model="r18", seed=1, meta={"zoomeval_commit": "c0ffee2"}),
        study(tmp_path / "next", meta={"zoomeval": "0.2.0"}),
    )
    groups = {r["study"]: r["group"] for r in rows}
    assert groups["early"] == groups["later"] != groups["next"]
    assert {r["study"]: r["zoomeval_commit"] for r in rows} == {"early": "c0ffee", "later": "c0ffee2", "next": "c0ffee"}
    assert groups["next"].endswith(" — zoomeval 0.2.0 (not 0.1.0)")
    assert {r["study"]: r["note"] for r in rows}["next"] == "kept apart from the rows with zoomeval 0.1.0 (not 0.2.0)"


def test_the_same_normalisation_spelled_in_float32_or_float64_is_one_model_evaluated_alike(tmp_path) -> None:
    """An entry point records its normalisation from a float32 tensor, the checkpoint route from the config: the
    same weights and values land in one table, noted as the same model with the same numbers."""
    as_float32 = {"mean": [float(v) for v in (0.48500001430511475, 0.4560000002384186, 0.4059999883174896)]}
    rows = board(study(tmp_path / "checkpoint"), study(tmp_path / "entry_point", spec=as_float32))
    assert len({r["group"] for r in rows}) == 1
    assert [r["mean"] for r in rows] == ["[0.485, 0.456, 0.406]"] * 2
    assert sorted(r["note"] for r in rows) == ["same numbers as study checkpoint", "same numbers as study entry_point"]


def test_rows_rank_by_acc_max_unless_another_accuracy_is_asked_for(tmp_path) -> None:
    """Seed 1's model is better at 1-crop (3 of 12 against 2), seed 5's at acc_max (11 against 10; brute force)."""
    a, b = study(tmp_path / "a", seed=1), study(tmp_path / "b", model="r18", seed=5)
    best = {s: brute_force(s) for s in (1, 5)}
    assert best[1]["acc_1crop"] > best[5]["acc_1crop"] and best[5]["acc_max"] > best[1]["acc_max"]
    assert [r["study"] for r in board(a, b)] == ["b", "a"]
    out = tmp_path / "by_1crop.md"
    assert zoomeval("leaderboard", str(a), str(b), "--rank-by", "acc_1crop", "-o", str(out)).returncode == 0
    lines = [line for line in out.read_text().splitlines() if line.startswith("| r")]
    assert [line.split(" | ")[1] for line in lines] == ["a", "b"]
    assert "its models best first by acc_1crop" in out.read_text()
    assert refused(a, "--rank-by", "acc_mean").startswith("zoomeval leaderboard: argument --rank-by: invalid choice")


def test_a_subset_class_set_is_not_ranked_with_the_full_one_and_another_normalisation_is(tmp_path) -> None:
    subset = {"class_set": "subset", "class_indices": [0, 1, 2, 3, 4, 5, 6, 7]}
    rows = board(
        study(tmp_path / "full"),
        study(tmp_path / "subset", seed=3, meta=subset),
        study(tmp_path / "norm", model="r18", seed=1, spec={"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}),
    )
    groups = {r["study"]: r["group"] for r in rows}
    assert groups["full"] == groups["norm"] != groups["subset"]
    notes = {r["study"]: r["note"] for r in rows}
    digest = hashlib.sha256(json.dumps(subset["class_indices"]).encode()).hexdigest()[:12]
    assert (
        notes["full"]
        == notes["norm"]
        == f"kept apart from the rows with class_set subset of 8 classes ({digest}) (not full)"
    )
    assert notes["subset"] == f"kept apart from the rows with class_set full (not subset of 8 classes ({digest}))"
    assert {r["study"]: r["mean"] for r in rows}["norm"] == "[0.5, 0.5, 0.5]"
    # the subset's heading says what it scored: the 4 classes its images have (metrics.json's n_classes, which the
    # scoring takes from the manifest), so a random guess is right 1 time in 4
    assert groups["subset"].endswith("top_k 3 [scored demo over 4 of the 1000 classes, chance 25.00 %]")
    assert "scored" not in groups["full"]


def test_the_markdown_shows_a_readable_weights_tag_and_the_csv_the_full_one() -> None:
    assert readable_architecture("tf_efficientnet_lite0.efficientnet-lite0-57934424.pth") == (
        "tf_efficientnet_lite0.efficientnet-lite0-57934424"
    )
    assert readable_architecture("resnet18." + "0cb05c73a6b9" + "f" * 52) == "resnet18.0cb05c73a6b9"
    assert readable_architecture("resnet50.a1_in1k") == "resnet50.a1_in1k"
    assert readable_architecture("vit.ckpt.pth.tar") == "vit.ckpt"
    assert readable_architecture("own.pth") == "own.pth"  # no tag, or a tag that is only a suffix: as given


def test_a_half_finished_study_is_refused_or_listed_apart(tmp_path) -> None:
    """A copy of a finished study whose predictions were rerun at other scales, its analysis not (yet)."""
    study(tmp_path / "done")
    shutil.copytree(tmp_path / "done", tmp_path / "half")
    finished = study(tmp_path / "rerun", scales=[64, 256])
    predictions = LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    shutil.copy(finished / predictions, tmp_path / "half" / predictions)
    line = refused(tmp_path / "done", tmp_path / "half")
    assert line.startswith(f"zoomeval leaderboard: {tmp_path / 'half' / predictions}: changed since ")
    assert "metrics.json, computed from it, recorded it" in line and "stale or tampered" in line
    proc = zoomeval("leaderboard", str(tmp_path / "done"), str(tmp_path / "half"), "--allow-stale")
    assert proc.returncode == 0
    assert "| r50 | done |" in proc.stdout and "| r50 | half |" not in proc.stdout
    assert "## Left apart (--allow-stale)" in proc.stdout and f"- {tmp_path / 'half' / predictions}" in proc.stdout
    assert proc.stderr.startswith(f"zoomeval leaderboard: left apart: {tmp_path / 'half' / predictions}: changed")
    # an unsealed study (no index) is refused naming the index
    (tmp_path / "half" / LAYOUT.path("study_index")).unlink()
    assert "results/study.json: missing; the study is unfinished" in refused(tmp_path / "half")


def test_tampered_counts_are_refused_and_verify_recomputes_the_numbers(tmp_path) -> None:
    a = study(tmp_path / "a")
    path = edit_metrics(a, seal=False, n_images=2 * N)
    assert f"{path}: changed since {a / 'results/study.json'} recorded it" in refused(a)
    edit_metrics(a, n_images=2 * N)  # resealed: the predictions hold 12 images only
    assert f"{path}: n_images 24 is more than the 12 images of" in refused(a)
    study(a)
    expected = brute_force(0)["acc_max"]
    forged = round(expected * N / 100) + 1
    edit_metrics(a, acc_max=100 * forged / N)  # a count of 12, resealed: only --verify finds it
    assert zoomeval("leaderboard", str(a)).returncode == 0
    assert f"{path}: acc_max is {100 * forged / N:.4f}, but {expected:.4f} recomputed from" in refused(a, "--verify")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"acc_max": float("inf")}, "acc_max is inf; expected a number from 0 to 100"),
        ({"acc_1crop": "41.67"}, "acc_1crop is '41.67'; expected a number from 0 to 100 or null"),
        ({"cover_size": -5}, "cover_size is -5; expected a whole number >= 0"),
        ({"n_images": 12.5}, "n_images is 12.5; expected a whole number >= 0"),
        ({"model": "<img src=x onerror=alert(1)>"}, "holds the metrics of demo/original/<img src=x onerror=alert(1)>"),
    ],
)
def test_a_malformed_metrics_file_is_refused_naming_the_field(tmp_path, edit, message) -> None:
    path = edit_metrics(study(tmp_path / "a"), **edit)
    assert f"{path}: {message}" in refused(tmp_path / "a")


def test_malformed_files_and_options_give_one_line_not_a_traceback(tmp_path) -> None:
    a = study(tmp_path / "a")
    metrics = a / LAYOUT.path("metrics", scored="demo", variant="original", model="r50")
    document, index = metrics.read_text(), (a / "results/study.json").read_text()
    metrics.write_text(json.dumps([json.loads(document)]))
    reseal_failed = zoomeval("leaderboard", str(a))
    assert reseal_failed.returncode == 2 and "Traceback" not in reseal_failed.stderr
    write_json(
        a / "results/study.json",
        {
            "kind": "study_index",
            "schema_version": 1,
            "results": [
                {
                    "path": str(metrics.relative_to(a)),
                    "sha256": hashlib.sha256(metrics.read_bytes()).hexdigest(),
                    "key": {},
                }
            ],
        },
    )
    assert f"{metrics}: not a metrics document (a JSON object); re-run the analysis" in refused(a)
    metrics.write_text(document)
    (a / "results/study.json").write_text(index)
    predictions = a / LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    table = pq.read_table(predictions)
    forge = json.loads(table.schema.metadata[b"zoomeval"])
    for broken, message in [
        ({k: v for k, v in forge.items() if k != "model"}, "metadata field model is absent"),
        (None, "no zoomeval metadata; expected a file written by zoomeval"),
    ]:
        if broken is None:
            pq.write_table(table.replace_schema_metadata({}), predictions)
        else:
            write_parquet(predictions, table, broken)
        edit_metrics(
            a,
            inputs={
                "predictions": {
                    "path": str(predictions.relative_to(a)),
                    "sha256": hashlib.sha256(predictions.read_bytes()).hexdigest(),
                },
                "standard": None,
            },
        )
        assert f"{predictions}: {message}" in refused(a)
    (tmp_path / "out").mkdir()
    assert "-o " in refused(a, "-o", tmp_path / "out") and "is a directory" in refused(a, "-o", tmp_path / "out")
    assert "written as .csv, .md, .html" in refused(a, "-o", tmp_path / "x.txt")
    write_json(
        a / "results/study.json",
        {"kind": "study_index", "schema_version": 1, "results": [{"path": "../../etc/metrics.json"}]},
    )
    assert "results[0].path is '../../etc/metrics.json'; expected a metrics file results/analysis/" in refused(a)


def test_cells_carry_no_formula_markup_column_break_or_escape_code(tmp_path) -> None:
    names = ['=HYPERLINK("evil.example","x")', "a|b|c", "x\x1b[31mred", "<img src=x onerror=alert(1)>"]
    folders = [study(tmp_path / name, meta={"torch": "+1+1"}) for name in names]
    rows = board(*folders, cwd=tmp_path)
    with open(tmp_path / "board.csv", newline="") as fh:
        raw = list(csv.reader(fh))[1:]
    assert {r[COLUMNS.index("study")] for r in raw} >= {"'" + names[0], "a|b|c"}
    assert {r["torch"] for r in rows} == {"'+1+1"}
    markdown = zoomeval("leaderboard", *map(str, folders)).stdout
    assert "\x1b" not in markdown and "| a\\|b\\|c |" in markdown
    line = next(line for line in markdown.splitlines() if "a\\|b\\|c" in line)
    assert len(line.replace("\\|", "").split("|")) == len(markdown.splitlines()[6].split("|"))  # header's columns
    assert zoomeval("leaderboard", *map(str, folders), "-o", str(tmp_path / "b.html")).returncode == 0
    page = (tmp_path / "b.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    (folders[2] / "results/study.json").unlink()  # a refusal naming the folder prints no escape code either
    line = refused(*folders)
    assert "\x1b" not in line and "x[31mred/results/study.json: missing" in line


def test_a_study_given_twice_is_reported_once_with_a_note(tmp_path) -> None:
    a = study(tmp_path / "a")
    rows = board(a, tmp_path / "a" / ".." / "a")
    assert [(r["study"], r["note"]) for r in rows] == [("a", "study given 2 times, reported once")]


def test_the_timm_format_has_timms_columns_from_the_standard_evaluation(tmp_path) -> None:
    study(tmp_path / "a", label_sets=("in", "real"))
    study(tmp_path / "b", model="r18", seed=1, spec={"architecture": "resnet18", "param_count": 11_689_512})
    assert "--dataset: the studies evaluate demo, demo_real; name one" in refused(tmp_path / "a", "--format", "timm")
    proc = zoomeval("leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "timm", "--dataset", "demo")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    # top1: i % 3 == seed % 3, 4 of 12; top5 adds the odd images (the label third in top5): 4 + 4 (seed 0: i = 1,
    # 5, 7, 11 are odd and not multiples of 3; seed 1: 3, 5, 9, 11) = 8 of 12
    assert rows == [
        {
            "model": m,
            "top1": "33.333",
            "top1_err": "66.667",
            "top5": "66.667",
            "top5_err": "33.333",
            "param_count": p,
            "img_size": "224",
            "crop_pct": "0.950",
            "interpolation": "bicubic",
            "note": "",
        }
        for m, p in (("resnet18.a1_in1k", "11.69"), ("resnet50.a1_in1k", "25.56"))
    ]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_html_page_sorts_offline_in_chromium(tmp_path) -> None:
    page = tmp_path / "board.html"
    folders = [study(tmp_path / "a"), study(tmp_path / "b", model="r18", seed=2)]
    assert zoomeval("leaderboard", *map(str, folders), "-o", str(page)).returncode == 0
    assert "http" not in page.read_text()  # nothing to fetch
    values = sorted((brute_force(s)["acc_max"] for s in (0, 2)), reverse=True)
    models = "[...document.querySelector('table').tBodies[0].rows].map(r => r.cells[{}].textContent)"
    column = list(COLUMNS[1:]).index("acc_max")
    header = f"document.querySelector('table').tHead.rows[0].cells[{column}]"
    with Chromium(tmp_path / "profile") as chrome:
        chrome.open(page.as_uri())
        chrome.wait_for("document.body?.dataset.ready === '1'")
        chrome.evaluate(f"{header}.click()")  # descending first
        assert chrome.evaluate(models.format(column)) == [f"{v:.2f}" for v in values]
        chrome.evaluate(f"{header}.click()")
        assert chrome.evaluate(models.format(column)) == [f"{v:.2f}" for v in values[::-1]]
        assert chrome.errors == []


def test_a_limited_runs_study_is_read_under_its_own_results_root(tmp_path) -> None:
    """A limited run's study (``results/limit-2``, whose layout the study's leaderboard rule passes) is read through
    its own index and files; the default root, which holds no index, is refused naming it."""
    folder = study(tmp_path / "a", layout=run_layout(2))
    assert (folder / "results" / "limit-2" / "study.json").is_file()
    rows, problems = study_rows(folder, "a", layout=run_layout(2))
    assert problems == [] and [r["model"] for r in rows] == ["r50"]
    assert (rows[0]["acc_1crop"], rows[0]["acc_max"]) == pytest.approx(tuple(brute_force(0).values()))
    with pytest.raises(ValueError, match=r"/results/study.json: missing"):
        study_rows(folder, "a")
    # the command line reads the same tree with --limit, in both formats
    board = zoomeval("leaderboard", str(folder), "--limit", "2", "-o", str(tmp_path / "board.csv"))
    assert board.returncode == 0, board.stderr
    with (tmp_path / "board.csv").open(newline="") as handle:
        written = [(r["model"], r["acc_1crop"]) for r in csv.DictReader(handle)]
    assert written == [("r50", f"{rows[0]['acc_1crop']:.2f}")]
    timm = zoomeval("leaderboard", str(folder), "--limit", "2", "--format", "timm", "--dataset", "demo")
    assert timm.returncode == 0 and timm.stdout.splitlines()[0].startswith("model,top1,"), timm.stderr
    refused = zoomeval("leaderboard", str(folder), "--limit", "3")
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1)
    assert "limit-3/study.json: missing" in refused.stderr
    refused = zoomeval("leaderboard", str(folder), "--limit", "0")
    assert refused.stderr == "zoomeval leaderboard: --limit: 0 is no number of images; give N >= 1\n"


def test_an_index_entry_out_of_the_study_is_refused_without_reading_that_file(tmp_path) -> None:
    """``..`` in an entry's wildcards, or a symlink out: refused naming the entry; the outside file's marker never
    printed."""
    a = study(tmp_path / "s" / "a")
    outside = tmp_path / "metrics.json"  # the study's parent's parent: where ../../../ of results/analysis/ leads
    outside.write_text(json.dumps({"schema_version": 6, "model": "SECRET-MARKER"}))
    index = read_json(a / "results/study.json")
    entry = index["results"][0]
    sneaky = "results/analysis/../../../metrics.json"
    write_json(a / "results/study.json", {**index, "results": [{**entry, "path": sneaky}]})
    line = refused(a)
    assert f"results[0].path is {sneaky!r}; expected a metrics file" in line and "SECRET" not in line
    linked = LAYOUT.path("metrics", scored="demo", variant="original", model="evil")
    (a / linked).parent.mkdir(parents=True)
    (a / linked).symlink_to(outside)
    write_json(a / "results/study.json", {**index, "results": [{**entry, "path": linked}]})
    line = refused(a)
    assert f"results[0].path is {linked!r}, which leads out of the study's {(a / 'results').resolve()}" in line
    assert "SECRET" not in line
    # an input of a metrics file symlinked out of the study likewise
    study(a)
    predictions = a / LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    shutil.move(predictions, tmp_path / "elsewhere.parquet")
    predictions.symlink_to(tmp_path / "elsewhere.parquet")
    assert "inputs.predictions.path is " in refused(a) and "leads out of the study" in refused(a)


def test_duplicate_entries_and_deep_or_huge_indexes_are_refused_in_one_line(tmp_path, monkeypatch) -> None:
    a = study(tmp_path / "a")
    index = read_json(a / "results/study.json")
    write_json(a / "results/study.json", {**index, "results": index["results"] * 1000})
    line = refused(a)
    path = index["results"][0]["path"]
    assert f"results/study.json: results[1] lists {path} again (as results[0] does)" in line
    (a / "results/study.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "results/study.json: nested deeper than any zoomeval document" in refused(a)
    study(a)
    (a / path).write_text("[" * 100_000 + "]" * 100_000)
    reseal(a)
    assert f"{a / path}: nested deeper than any zoomeval document" in refused(a)
    from zoomeval.study import index as study_index

    study(a)
    monkeypatch.setattr(study_index, "MAX_INDEX_BYTES", 100)  # the bound, scaled down: checked before any read
    with pytest.raises(ValueError, match=r"study.json: \d+ bytes, more than the 100 an index"):
        study_index.read_index(a)


def reseal_all(folder: Path) -> None:
    """Every sha256 rewritten over the files as they now are: the inputs' in metrics.json and cover.json, then the
    index's (a forger's reseal, the numbers left as they are)."""
    for name in ("metrics", "cover"):
        path = folder / LAYOUT.path(name, scored="demo", variant="original", model="r50")
        document = json.loads(path.read_text())
        for item in document["inputs"].values():
            if item is not None:
                item["sha256"] = hashlib.sha256((folder / item["path"]).read_bytes()).hexdigest()
        path.write_text(json.dumps(document))
    reseal(folder)


def test_forgeries_resealed_with_every_hash_rewritten_are_refused_by_counts_or_verify(tmp_path) -> None:
    """A flipped prediction, an edited metric and a cut prediction file: plain refuses the cut file by its row count
    (Parquet footer against n_images x views); --verify refuses all three."""
    predictions = LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    flipped, edited, cut = (study(tmp_path / name) for name in ("flipped", "edited", "cut"))
    table = pq.read_table(flipped / predictions)
    one_crop = next(
        i
        for i, (s, r, c) in enumerate(zip(*(table[k].to_pylist() for k in ("scale", "row", "col")), strict=True))
        if (s, r, c) == (256, 1, 1)
    )
    preds = table["pred"].to_pylist()
    preds[one_crop] = RECORDS[0].labels[0] if preds[one_crop] == 999 else 999
    metadata = json.loads(table.schema.metadata[b"zoomeval"])
    write_parquet(flipped / predictions, table.set_column(4, "pred", pa.array(preds, pa.int16())), metadata)
    write_parquet(cut / predictions, table.slice(0, len(table) - 1), metadata)
    for folder in (flipped, cut):
        reseal_all(folder)
    edit_metrics(edited, acc_max=brute_force(0)["acc_max"] - 100 / N)
    reseal_all(edited)
    assert f"{cut / predictions}: {N * 27 - 1} rows, not the {N} images x 27 views its metadata gives" in refused(cut)
    for folder in (flipped, edited):
        assert zoomeval("leaderboard", str(folder)).returncode == 0  # the sealed files agree: plain cannot tell
    assert f"acc_1crop is {brute_force(0)['acc_1crop']:.4f}, but " in refused(flipped, "--verify")
    assert "acc_max is " in refused(edited, "--verify") and "rows, not the" in refused(cut, "--verify")


def test_a_relabelled_manifest_is_refused_where_a_table_reads_it(tmp_path) -> None:
    """timm's top-5 comes from the manifest's labels: relabelled, it would be 0.000 with exit 0."""
    a = study(tmp_path / "a")
    before = zoomeval("leaderboard", str(a), "--format", "timm")
    assert before.returncode == 0, before.stderr
    write_manifest(
        a / LAYOUT.path("manifest", dataset="demo"),
        [Record(r.image_id, r.path, [900], ["n"], 300, 300) for r in RECORDS],
        "demo",
    )
    line = refused(a, "--format", "timm")
    assert f"{a / LAYOUT.path('manifest', dataset='demo')}: its images and labels are not the ones the key" in line
    assert "its images and labels are not the ones" in refused(a, "--verify")


def test_each_distinct_file_is_hashed_once_however_many_results_name_it(tmp_path, monkeypatch) -> None:
    """Linear in the index: two label sets share one prediction file and one standard evaluation; each is hashed
    once, and not again while unchanged (counted, not timed)."""
    from zoomeval.study import verified

    a = study(tmp_path / "a", label_sets=("in", "real"))
    hashed: list[str] = []
    real = verified.sha256_file
    monkeypatch.setattr(verified, "sha256_file", lambda p: hashed.append(str(p)) or real(p))
    verified._hashed.cache_clear()
    results, problems = verified.read_study(a, LAYOUT)
    assert (len(results), problems) == (2, [])
    named = [
        LAYOUT.path("predictions", dataset="demo", variant="original", model="r50"),
        LAYOUT.path("standard", dataset="demo", model="r50"),
    ]
    assert sorted(Path(h).name for h in hashed) == sorted(["metrics.json"] * 2 + [Path(n).name for n in named])
    verified.read_study(a, LAYOUT)  # read again, nothing changed: nothing hashed again
    assert len(hashed) == 4


def test_study_reads_a_sealed_study_through_the_leaderboards_checks(tmp_path) -> None:
    """zoomeval.Study refuses a prediction file changed after sealing with the leaderboard's line, or warns of it."""
    from zoomeval.study.reader import Study

    a = study(tmp_path / "a")
    assert Study(a).problems == [] and len(Study(a).predictions("demo", "original", "r50").collect()) == N * 27
    predictions = a / LAYOUT.path("predictions", dataset="demo", variant="original", model="r50")
    table = pq.read_table(predictions)
    write_parquet(predictions, table.slice(1), json.loads(table.schema.metadata[b"zoomeval"]))
    line = refused(a).removeprefix("zoomeval leaderboard: ")
    with pytest.raises(ValueError) as info:
        Study(a).predictions("demo", "original", "r50")
    assert str(info.value) == line and line.startswith(f"{predictions}: changed since")
    with pytest.raises(ValueError, match="changed since"):
        Study(a).provenance("demo", "original", "r50")
    with pytest.warns(UserWarning, match="changed since"):
        Study(a, allow_stale=True).predictions("demo", "original", "r50")


PAPER_SCALES = load_yaml(Path(__file__).parents[1] / "config" / "paper.yaml")["scales"]


def full_protocol_key(label_set: str = "in", class_set: str = "full") -> dict:
    """A comparability key shaped like the paper's ImageNet val protocol (its 36 scales in order, top-36)."""
    return {"label_set": label_set, "variant": "original", "class_set": class_set, "scales": PAPER_SCALES, "top_k": 36}


def test_the_papers_table_1_stands_beside_a_full_imagenet_val_result_and_nothing_smaller() -> None:
    from zoomeval.report.published import published_table

    table = published_table(full_protocol_key(), 50_000, "imagenet_val")
    assert (table.source, table.column) == ("paper, Table 1", "IN")
    resnet = table.row_of(("torchvision", "resnet50", "IMAGENET1K_V1"))
    assert (resnet.name, resnet.values) == ("ResNet-50", {"acc_1crop": 75.75, "acc_top_k": 94.46, "acc_max": 96.78})
    assert table.row_of(("timm", "resnet50", "a1_in1k")) is None  # other weights: no published row of theirs
    assert published_table(full_protocol_key("in_real"), 50_000, "imagenet_val").column == "IN+ReaL"
    vit = published_table(full_protocol_key("in_real"), 50_000, "imagenet_val").row_of(
        ("torchvision", "vit_b_32", "IMAGENET1K_V1")
    )
    assert vit.values["acc_max"] == 98.91  # the paper's headline
    subset = full_protocol_key(class_set="subset of 200 classes (0123456789ab)")
    assert published_table(subset, 7_500, "imagenet_a").column == "IN-A"
    assert published_table(full_protocol_key(), 49_999, "imagenet_val") is None  # a limited run, or images left out
    assert published_table(full_protocol_key(), 50_000, None) is None  # a result that records no adapter
    assert published_table({**full_protocol_key(), "scales": PAPER_SCALES[:-1]}, 50_000, "imagenet_val") is None
    assert published_table({**full_protocol_key(), "top_k": 18}, 50_000, "imagenet_val") is None
    hard = published_table(
        {"label_set": "in", "variant": "original", "class_set": "full", "scales": [256]}, 10_980, "imagenet_hard"
    )
    assert hard.row_of(("open_clip", "ViT-L-14-336", "openai")).values == {"acc_standard": 2.02}


def test_published_rows_follow_a_matching_table_and_a_reproduced_row_notes_its_difference(tmp_path, monkeypatch):
    """A published table made for the tiny study's protocol (the real ones need 50,000 images): the study's r50
    (timm resnet50.a1_in1k, seed 0: 1-crop 4 of 12, acc_max 11 of 12) notes the published values and its
    differences; the published rows come after it, unranked; the same study without a recorded adapter shows none."""
    from zoomeval.publish import leaderboard
    from zoomeval.publish.boards import write_merged
    from zoomeval.report.published import Protocol, PublishedRow, PublishedTable

    protocol = Protocol("demo", N, "in", "original", "full", tuple(SCALES), 3)
    rows = (
        PublishedRow("ResNet-50", frozenset({("timm", "resnet50", "a1_in1k")}), {"acc_1crop": 30.0, "acc_max": 90.0}),
        PublishedRow(
            "AlexNet", frozenset({("torchvision", "alexnet", "IMAGENET1K_V1")}), {"acc_1crop": 20.0, "acc_max": 95.0}
        ),
    )
    table = PublishedTable("paper, Table 1", "IN", protocol, rows)
    monkeypatch.setattr(leaderboard, "published_table", lambda *match: table if protocol.matches(*match) else None)
    recorded = study(tmp_path / "recorded", meta={"dataset_adapter": "demo"})
    out = tmp_path / "board.csv"
    write_merged([recorded], out)
    with open(out, newline="") as fh:
        board = list(csv.DictReader(fh))
    assert [(r["study"], r["model"], r["acc_1crop"], r["acc_max"]) for r in board] == [
        ("recorded", "r50", "33.33", "91.67"),
        ("reported (paper, Table 1)", "ResNet-50", "30.00", "90.00"),
        ("reported (paper, Table 1)", "AlexNet", "20.00", "95.00"),  # never ranked: 95 > 91.67, still last
    ]
    assert board[0]["note"] == (
        "reported (paper, Table 1, IN) ResNet-50: acc_1crop 30.00 (this row +3.33), acc_max 90.00 (this row +1.67)"
    )
    assert board[1]["note"] == "paper, Table 1, column IN: published, not recomputed, not ranked"
    assert board[1]["acc_1crop_lo"] == "" and board[1]["weights_sha256"] == "" and len({r["group"] for r in board}) == 1
    text, _ = write_merged([recorded], None)
    assert "| ResNet-50 | reported (paper, Table 1) |  | 30.00 |  | 90.00 |" in text
    unrecorded = study(tmp_path / "unrecorded")  # no dataset_adapter: computed before 0.2.0
    assert "reported" not in write_merged([unrecorded], None)[0]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(extra=1), "published.yaml: unknown key(s) ['extra']"),
        (
            lambda d: d["tables"][0]["rows"][0].update(values=[1.0]),
            "published.yaml: tables[0].rows[0].values: expected one number per metric",
        ),
        (
            lambda d: d["tables"][0]["rows"][0].update(models="nosuch"),
            "published.yaml: tables[0].rows[0].models: 'nosuch' is not one of models",
        ),
        (
            lambda d: d["tables"][0]["protocol"].pop("adapter"),
            "published.yaml: tables[0].protocol: missing ['adapter']",
        ),
        (
            lambda d: d["tables"][0]["rows"][0].update(values=[101, 1, 1]),
            "published.yaml: tables[0].rows[0].values: expected percentages",
        ),
    ],
)
def test_the_published_results_file_is_read_strictly(edit, message) -> None:
    from importlib import resources

    from zoomeval.report.published import parse

    document = load_yaml(resources.files("zoomeval.report") / "published.yaml")
    edit(document)
    with pytest.raises(ValueError) as error:
        parse(document)
    assert str(error.value).startswith(message), str(error.value)
