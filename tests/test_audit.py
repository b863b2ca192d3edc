"""zoomeval audit: the sample, its guarantee and the tolerance rule checked by hand and by exact enumeration; then a
tiny sealed study (the demo model and the same weights under another normalisation, 4 images, 2 scales, one masked
variant) audited clean, and copies of it forged with every hash rewritten: each caught, or shown to pass where the
audit's docs say it cannot catch it (a swapped image without --images, a relabelled manifest)."""

import contextlib
import csv
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image, ImageOps

from tests.conftest import ROOT, copy_study, run_snakemake, write_config
from zoomeval.analysis.scoring import analyze_predictions, write_analysis
from zoomeval.audit import sample as audit_sample
from zoomeval.audit.files import audit_file, row_problems
from zoomeval.audit.sample import (
    LOGIT_ERROR,
    Audited,
    Auditor,
    Finders,
    detection_bound,
    logit_error,
    sample_rows,
    tolerance,
)
from zoomeval.audit.study import NOT_CHECKED, OWN_IMAGES, audit_study, report_lines
from zoomeval.cli import main
from zoomeval.core.checksums import sha256_file
from zoomeval.core.classes import wnids_of
from zoomeval.core.config import InferenceSettings
from zoomeval.core.io import read_json, read_metadata
from zoomeval.core.layout import run_layout
from zoomeval.core.manifest import read_manifest, write_manifest
from zoomeval.core.zoom import ZoomGrid
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD
from zoomeval.inference.predict import predict_to_file
from zoomeval.inference.recorded import recorded_spec
from zoomeval.inference.tables import write_table
from zoomeval.publish.leaderboard import ACCURACIES, hub_dataset, study_rows
from zoomeval.study.index import write_index

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_audit")


@pytest.mark.parametrize("rows, n", [(8, 3), (6, 6), (7, 1)])
def test_the_guarantee_is_exact_with_replacement_and_a_lower_bound_without(rows: int, n: int) -> None:
    """Every sample of n of the rows enumerated: the share that holds an altered row, for each count of altered rows."""
    for altered in range(1, rows + 1):
        p = altered / rows
        bad = set(range(altered))
        draws = list(itertools.product(range(rows), repeat=n))  # with replacement: the bound is exact
        assert sum(any(r in bad for r in d) for d in draws) / len(draws) == pytest.approx(detection_bound(p, n))
        subsets = list(itertools.combinations(range(rows), n))  # without, as the audit draws: at least the bound
        found = sum(any(r in bad for r in s) for s in subsets) / len(subsets)
        assert found >= detection_bound(p, n) - 1e-12
        assert found == pytest.approx(1 - math.comb(rows - altered, n) / math.comb(rows, n))
    assert detection_bound(0.25, 3) == 1 - 0.75**3 == 0.578125


def test_a_seeded_sample_is_the_same_in_every_run_and_another_for_another_seed_or_file() -> None:
    first = sample_rows(1000, 10, 5, "results/predictions/demo/original/m.parquet")
    assert list(first) == sorted(set(first.tolist())) and len(first) == 10 and first.max() < 1000
    code = (
        "from zoomeval.audit.sample import sample_rows; "
        "print(sample_rows(1000, 10, 5, 'results/predictions/demo/original/m.parquet').tolist())"
    )
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert again.strip() == str(first.tolist())  # another process, another hash seed: the same rows
    assert list(sample_rows(1000, 10, 6, "results/predictions/demo/original/m.parquet")) != list(first)
    assert list(sample_rows(1000, 10, 5, "results/standard/demo/m.parquet")) != list(first)
    assert list(sample_rows(4, 10, 5, "x")) == [0, 1, 2, 3]  # a small file: every row


def test_the_sample_is_uniform_over_the_rows() -> None:
    counts = np.zeros(8)
    for seed in range(3000):
        counts[sample_rows(8, 3, seed, "f")] += 1
    assert np.all(np.abs(counts / 3000 - 3 / 8) < 0.04)  # each row drawn 3/8 of the time (sd 0.009)


def test_the_tolerance_adds_both_runs_errors_twice() -> None:
    assert tolerance(("bf16", "cuda"), ("fp32", "cpu")) == pytest.approx(2 * (1.0 + 1e-3))
    assert tolerance(("fp32", "cpu"), ("fp32", "cpu")) == pytest.approx(4e-3)
    assert logit_error("fp32", "cpu,cuda") == LOGIT_ERROR["fp32", "cuda"]  # a job run in parts: the worst
    assert logit_error("fp32", "cuda:1") == LOGIT_ERROR["fp32", "cuda"]
    assert logit_error("fp32", "mps") == max(v for (p, _), v in LOGIT_ERROR.items() if p == "fp32")
    with pytest.raises(ValueError, match="precision 'int8'"):
        logit_error("int8", "cpu")


def row(pred: int, logits: np.ndarray, classes: np.ndarray, **extra) -> dict:
    """A stored row whose confidence is the softmax probability of ``pred`` over ``classes``."""
    z = logits[classes] - logits[classes].max()
    conf = float(np.exp(z[list(classes).index(pred)]) / np.exp(z).sum()) if pred in classes else 0.5
    return {"pred": pred, "pred_full": int(np.argmax(logits)), "conf": conf, **extra}


def test_a_stored_top1_within_the_tolerance_of_the_recomputed_one_is_a_tie_beyond_it_a_mismatch() -> None:
    logits = np.zeros(1000)
    logits[3], logits[7] = 5.0, 4.99  # classes 3 and 7 are 0.01 apart in log-probability
    everything = np.arange(1000)
    assert row_problems(row(3, logits, everything), logits, everything, 0.05) == ([], False)
    stored = {**row(7, logits, everything), "pred_full": 7}
    assert row_problems(stored, logits, everything, 0.05) == ([], True)
    problems, tie = row_problems(stored, logits, everything, 0.001)
    assert not tie and problems == ["top-1 7 stored, 3 recomputed (0.01 above it in log-probability)"]
    problems, _ = row_problems({**row(500, logits, everything), "pred_full": 500}, logits, everything, 0.05)
    assert problems[0] == "top-1 500 stored, 3 recomputed (5 above it in log-probability)"
    assert row_problems({**row(3, logits, everything), "conf": 0.9}, logits, everything, 0.05)[0] == [
        f"confidence 0.9 stored for class 3, {np.exp(5) / (np.exp(5) + np.exp(4.99) + 998):.4g} recomputed"
    ]


def test_a_subset_is_scored_over_its_classes_and_pred_full_over_all() -> None:
    logits = np.zeros(1000)
    logits[[3, 7, 9]] = [1.0, 2.0, 0.5]
    logits[100] = 9.0  # the top class overall, outside the subset
    subset = np.array([3, 7, 9])
    assert row_problems(row(7, logits, subset), logits, subset, 0.01) == ([], False)
    problems, _ = row_problems({**row(7, logits, subset), "pred_full": 7}, logits, subset, 0.01)
    assert problems == ["top-1 over all classes 7 stored, 100 recomputed (7 above it in log-probability)"]
    assert row_problems(row(5, logits, subset), logits, subset, 0.01)[0][0] == (
        "top-1 5 stored, which is not in the class set"
    )


def test_stored_top5_must_be_the_recomputed_top5_up_to_the_tolerance() -> None:
    logits = np.arange(1000, dtype=float) / 100  # class 999 first, then 998, ...
    good = {"top5": [999, 998, 997, 996, 995], "top5_logit": [9.99, 9.98, 9.97, 9.96, 9.95]}
    everything = np.arange(1000)
    assert row_problems(row(999, logits, everything, **good), logits, everything, 0.05) == ([], False)
    swapped = {"top5": [999, 998, 997, 996, 900], "top5_logit": [9.99, 9.98, 9.97, 9.96, 9.0]}
    problems, _ = row_problems(row(999, logits, everything, **swapped), logits, everything, 0.05)
    assert problems == ["top5 classes [900] stored, recomputed logits [9.0]"]


# A tiny sealed study, run once by the workflow: the demo model and the same weights under ImageNet's normalisation
# (another model, for forgery c), the first 4 demo images at 2 scales (72 rows per prediction file), the original and
# the object-only variant, top-5 stored.
LAYOUT4 = run_layout(4)
SEED, N = 7, 3  # the leaderboard's and the forgery tests' sample: 3 rows per file
LITE0 = LAYOUT4.path("predictions", dataset="demo", variant="original", model="lite0")
LITE0_IN = LAYOUT4.path("predictions", dataset="demo", variant="original", model="lite0_in")


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("audit") / "sealed"
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    lite0 = demo["models"]["efficientnet_lite0"]
    write_config(
        work,
        scales=[64, 256],
        top_k=2,
        limit=4,
        stats={"pairs": []},
        datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original", "fgset"]}},
        models={"lite0": lite0, "lite0_in": {**lite0, "mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD)}},
        inference={**demo["inference"], "store_top5": True},
    )
    run_snakemake(work, LAYOUT4.path("study_index"))
    return work


def auditor(sample: int = N, **changes) -> Auditor:
    return Auditor(sample=sample, seed=SEED, device="cpu", layout=LAYOUT4, **changes)


def reseal(folder: Path) -> None:
    """Every hash rewritten, as a forger would: each result's analysis re-run on the files as they now are, then the
    study index written again."""
    index = read_json(folder / LAYOUT4.path("study_index"))
    with contextlib.chdir(folder):
        for entry in index["results"]:
            inputs = read_json(entry["path"])["inputs"]
            predictions = inputs["predictions"]["path"]
            records = read_manifest(LAYOUT4.path("manifest", dataset="demo"))
            standard = (inputs.get("standard") or {}).get("path")
            analysis = analyze_predictions(
                predictions,
                records,
                top_k=2,
                standard_path=standard,
                aggregates_path=predictions.replace(".parquet", ".aggregates.parquet"),
            )
            folder_of = Path(entry["path"]).parent
            write_analysis(analysis, entry["path"], folder_of / "cover.json", folder_of / "correct.npz")
        write_index(LAYOUT4.path("study_index"), Path("."), [e["path"] for e in index["results"]])


def forge(sealed: Path, folder: Path, path: str, change, meta: dict | None = None) -> Path:
    """A copy of the study with the prediction file ``path`` changed (``change`` of its table, ``meta`` its
    metadata) and every hash rewritten."""
    shutil.copytree(sealed, folder)
    table = pq.read_table(folder / path)
    write_table(folder / path, change(table), meta or read_metadata(folder / path))
    reseal(folder)
    return folder


def sampled(path: str) -> list[int]:
    return sample_rows(72, N, SEED, path).tolist()


def wrong_row(sealed: Path) -> int:
    """A row of lite0's original predictions in the sample whose stored top-1 is wrong."""
    records = {r.image_id: r for r in read_manifest(sealed / LAYOUT4.path("manifest", dataset="demo"))}
    table = pq.read_table(sealed / LITE0).to_pylist()
    (row, *_) = [k for k in sampled(LITE0) if table[k]["pred"] not in records[table[k]["image_id"]].labels]
    return row


def with_column(table: pa.Table, name: str, values: list) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, table.schema.field(name).type))


@pytest.fixture(scope="module")
def forged(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """(a) one wrong prediction changed to another wrong class; (b) every prediction made correct and confident, the
    metrics recomputed with it; (c) lite0_in's predictions under lite0's name. Every hash rewritten each time."""
    base = tmp_path_factory.mktemp("forged")
    records = read_manifest(sealed / LAYOUT4.path("manifest", dataset="demo"))
    labels = {r.image_id: r.labels for r in records}
    row = wrong_row(sealed)

    def another_wrong(table: pa.Table) -> pa.Table:
        preds = table["pred"].to_pylist()
        preds[row] = next(c for c in range(1000) if c not in labels[table["image_id"][row].as_py()] and c != preds[row])
        return with_column(with_column(table, "pred", preds), "pred_full", preds)

    def all_correct(table: pa.Table) -> pa.Table:
        preds = [labels[i][0] for i in table["image_id"].to_pylist()]
        table = with_column(with_column(table, "pred", preds), "pred_full", preds)
        return with_column(table, "conf", [0.99] * len(preds))

    return {
        "a": forge(sealed, base / "a", LITE0, another_wrong),
        "b": forge(sealed, base / "b", LITE0, all_correct),
        "c": forge(sealed, base / "c", LITE0, lambda _: pq.read_table(sealed / LITE0_IN)),
    }


@pytest.mark.workflow
def test_an_untouched_study_audits_clean_when_every_row_is_checked(sealed: Path, capsys) -> None:
    record = audit_study(sealed, auditor(sample=10**6))
    files = {f["path"]: f for f in record["files"]}
    assert set(files) == {
        LAYOUT4.path(kind, dataset="demo", model=m, **({"variant": v} if kind == "predictions" else {}))
        for m in ("lite0", "lite0_in")
        for kind, v in (("predictions", "original"), ("predictions", "fgset"), ("standard", None))
    }
    for item in files.values():  # the masked variant's masks found by their recorded sha256
        assert (item["refused"], item["mismatches"], item["checked"]) == (None, [], item["rows"]), item
        assert item["rows"] == (4 if "standard" in item["path"] else 4 * 9 * 2)
        assert item["tolerance"] == pytest.approx(4e-3)  # fp32 on a CPU, audited so
    lines = report_lines(record)
    assert lines[1:4] == [f"not checked: {item}" for item in (*NOT_CHECKED, OWN_IMAGES)]  # no --images
    assert "every one of the 72 rows was recomputed: no row differs beyond the tolerance" in lines[5]
    assert lines[-1] == "all 6 files audited clean"
    assert main(["audit", str(sealed), "--limit", "4", "--sample", "2", "--seed", "5", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "2 of 72 rows checked, 0 mismatches" in out and "1 - (1 - p)^N = 0.019900" in out  # 1 - 0.99^2
    kept = read_json(sealed / LAYOUT4.path("audit"))
    assert (kept["kind"], kept["seed"], kept["sample"], kept["device"], kept["precision"]) == (
        "audit",
        5,
        2,
        "cpu",
        "fp32",
    )


def audit_one(folder: Path, path: str, **changes) -> Audited:
    audit = auditor(**changes)
    return audit_file(folder, "predictions", "lite0", folder / path, audit, Finders(folder, audit))


@pytest.mark.workflow
def test_a_wrong_prediction_changed_to_another_wrong_class_passes_verify_and_is_caught(sealed, forged) -> None:
    rows, problems = study_rows(forged["a"], "a", check=True, layout=LAYOUT4)  # --verify: the numbers still follow
    original, _ = study_rows(sealed, "s", layout=LAYOUT4)
    assert problems == [] and [r["acc_max"] for r in rows] == [r["acc_max"] for r in original]
    audited = audit_one(forged["a"], LITE0)
    assert audited.checked == N and len(audited.mismatches) == 1, audited
    assert audited.mismatches[0].startswith(f"row {wrong_row(sealed)}, image demo_00")  # the file's row number
    assert " stored, " in audited.mismatches[0] and "recomputed" in audited.mismatches[0]


@pytest.mark.workflow
def test_predictions_and_metrics_forged_together_and_another_models_predictions_are_caught(forged) -> None:
    rows, problems = study_rows(forged["b"], "b", check=True, layout=LAYOUT4)
    assert problems == [] and {r["acc_max"] for r in rows if r["model"] == "lite0" and r["variant"] == "original"} == {
        100.0
    }  # the forged numbers follow from the forged predictions
    for name in ("b", "c"):
        audited = audit_one(forged[name], LITE0)
        assert audited.checked == N and audited.mismatches and not audited.clean, (name, audited)


@pytest.mark.workflow
def test_results_stored_in_bf16_audited_in_fp32_give_ties_not_mismatches(sealed: Path, tmp_path: Path) -> None:
    """bf16 at small scales (many low-confidence crops) flips top-1s among near-equal classes: each is a tie."""
    folder = tmp_path / "bf16"
    shutil.copytree(sealed, folder)
    meta = read_metadata(folder / LITE0)
    settings = InferenceSettings(
        device="cpu", precision="bf16", num_workers=0, threads=2, store_top5=True, resize_backend="pil"
    )
    with contextlib.chdir(folder):  # the demo manifest's paths are relative to the study directory
        records = read_manifest(LAYOUT4.path("manifest", dataset="demo"))
        predict_to_file(
            LITE0,
            LITE0.replace(".parquet", ".aggregates.parquet"),
            records,
            recorded_spec(meta["model"]),
            ZoomGrid([10, 16, 256]),
            settings,
            "demo",
        )
    audited = audit_file(
        folder, "predictions", "lite0", folder / LITE0, auditor(sample=10**6), Finders(folder, auditor())
    )
    assert audited.tolerance == pytest.approx(2 * (LOGIT_ERROR["bf16", "cpu"] + LOGIT_ERROR["fp32", "cpu"]))
    assert (audited.checked, audited.mismatches) == (4 * 9 * 3, [])
    assert audited.ties >= 1, audited  # top-1s that bf16 changed: near ties, not forgeries


@pytest.mark.workflow
def test_leaderboard_audit_refuses_the_forged_copies_and_prints_the_untouched_one(sealed, forged, capsys) -> None:
    args = ["leaderboard", "--limit", "4", "--audit", str(N), "--seed", str(SEED)]
    assert main([*args, str(forged["a"])]) == 2
    err = capsys.readouterr().err
    assert f"{forged['a'] / LITE0}: failed the audit (seed {SEED}): 1 mismatches, the first: row " in err
    assert (
        main(
            [
                *args,
                "--allow-stale",
                "-o",
                str(sealed.parent / "board.csv"),
                str(sealed),
                *(str(forged[k]) for k in "abc"),
            ]
        )
        == 0
    )
    apart = capsys.readouterr().err.splitlines()
    assert sorted(
        line.split(": failed the audit")[0].removeprefix("zoomeval leaderboard: left apart: ") for line in apart
    ) == sorted(str(forged[k] / LITE0) for k in "abc")
    with open(sealed.parent / "board.csv") as fh:
        board = list(csv.DictReader(fh))
    mine = [r for r in board if r["study"] == "sealed"]
    assert len(mine) == 4 and {(r["audit_rows"], r["audit_mismatches"]) for r in mine} == {
        (str(2 * N), "0"),
        (str(N), "0"),
    }
    assert not [r for r in board if r["study"] in "abc" and r["model"] == "lite0" and r["variant"] == "original"]


def exported(sealed: Path, folder: Path, fmt: str) -> dict:
    args = ["export", str(sealed), "--format", fmt, "-o", str(folder), "--limit", "4", "--date", "2026-01-02"]
    assert main(args) == 0
    manifest = read_json(folder / "export.json")
    assert manifest["seal_sha256"] == hashlib.sha256((sealed / LAYOUT4.path("study_index")).read_bytes()).hexdigest()
    assert {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in manifest["files"]} == manifest["files"]
    return manifest


@pytest.mark.workflow
def test_each_export_round_trips_its_numbers_and_reads_back_as_the_study(sealed: Path, tmp_path: Path, capsys) -> None:
    from huggingface_hub import parse_eval_result_entries

    rows = {(r["model"], r["variant"]): r for r in study_rows(sealed, "sealed", layout=LAYOUT4)[0]}
    manifests = {fmt: exported(sealed, tmp_path / fmt, fmt) for fmt in ("hf", "timm", "eee")}
    assert manifests["hf"]["keys"] == {f"{m}/demo/{v}": r["key_sha256"] for (m, v), r in rows.items()}
    entries = sorted((tmp_path / "hf" / "hf").rglob("*.yaml"))
    assert len(entries) == sum(r[m] is not None for r in rows.values() for m in ACCURACIES) == 14
    for path in entries:  # hf/<model>/.eval_results/<dataset>-<variant>-<metric>.yaml
        (entry,) = parse_eval_result_entries(yaml.safe_load(path.read_text()))
        _, variant, metric = path.stem.split("-")
        row = rows[path.parts[-3], variant]
        assert (entry.dataset_id, entry.task_id, entry.value, entry.date) == (
            "demo",
            metric,
            round(row[metric], 4),
            "2026-01-02",
        )
        assert row["key_sha256"] in entry.notes and manifests["hf"]["seal_sha256"] in entry.notes
    for path in sorted((tmp_path / "timm" / "timm").glob("*.csv")):  # results-demo.<model>.csv: one architecture
        (line,) = list(csv.DictReader(path.open()))
        assert line["top1"] == f"{rows[path.suffixes[0][1:], 'original']['acc_standard']:.3f}"
    aggregates = sorted((tmp_path / "eee" / "eee").rglob("*.json"))
    assert len(aggregates) == len(rows)
    images = {r.image_id: r.sha256 for r in read_manifest(sealed / LAYOUT4.path("manifest", dataset="demo"))}
    for path in aggregates:
        record = json.loads(path.read_text())
        row = rows[record["model_info"]["name"], path.parts[-3]]
        assert {r["evaluation_result_id"]: r["score_details"]["score"] for r in record["evaluation_results"]} == {
            m: row[m] for m in ACCURACIES if row[m] is not None
        }
        detail = record["detailed_evaluation_results"]
        text = (tmp_path / "eee" / "eee" / detail["file_path"]).read_text()
        assert detail["checksum"] == hashlib.sha256(text.encode()).hexdigest()
        lines = [json.loads(line) for line in text.splitlines()]
        assert detail["total_rows"] == len(lines) and {x["sample_hash"] for x in lines} == set(images.values())
        for metric in {x["evaluation_result_id"] for x in lines}:  # each instance's score averages to the aggregate
            scores = [x["evaluation"]["score"] for x in lines if x["evaluation_result_id"] == metric]
            assert 100 * sum(scores) / len(scores) == pytest.approx(row[metric])
    for fmt in ("hf", "timm", "eee"):  # read back with the same verification as the study: the same numbers
        again = {(r["model"], r["variant"]): r for r in study_rows(tmp_path / fmt, fmt, layout=LAYOUT4)[0]}
        assert {k: [r[m] for m in ACCURACIES] for k, r in again.items()} == {
            k: [r[m] for m in ACCURACIES] for k, r in rows.items()
        }
        assert main(["leaderboard", "--limit", "4", str(tmp_path / fmt)]) == 0
    edited = entries[0]
    edited.write_text(edited.read_text().replace("value: ", "value: 1"))
    assert main(["leaderboard", "--limit", "4", str(tmp_path / "hf")]) == 2
    assert f"{edited}: not the export the verified study in" in capsys.readouterr().err


@pytest.mark.workflow
def test_every_eval_ever_records_follow_its_schemas(sealed: Path, tmp_path: Path) -> None:
    """Only where the every-eval-ever package (Python >= 3.12) is installed: its wheel carries the schemas."""
    schemas = pytest.importorskip("every_eval_ever.schema", reason="every-eval-ever needs Python >= 3.12")
    import jsonschema

    exported(sealed, tmp_path / "eee", "eee")
    aggregate = jsonschema.Draft7Validator(schemas.schema_json("eval.schema.json"))
    instance = jsonschema.Draft7Validator(schemas.schema_json("instance_level_eval.schema.json"))
    for path in (tmp_path / "eee" / "eee").rglob("*.json"):
        assert list(aggregate.iter_errors(json.loads(path.read_text()))) == []
    for path in (tmp_path / "eee" / "eee").rglob("*.jsonl"):
        assert [e for line in path.read_text().splitlines() for e in instance.iter_errors(json.loads(line))] == []


def test_an_export_names_a_hub_dataset_by_its_repo_and_the_commit_it_was_read_at() -> None:
    hub = {"dataset": "hard", "key": {"revisions": {"parquet": "taesiri/imagenet-hard@" + "5c" * 20}}}
    assert hub_dataset(hub) == ("taesiri/imagenet-hard", "5c" * 20)
    assert hub_dataset({"dataset": "demo", "key": {"revisions": None}}) == ("demo", None)


def test_without_a_seed_an_audit_draws_one_fresh_and_keeps_the_rest() -> None:
    given = Auditor(sample=5, layout=run_layout(4))
    drawn = {given.seeded().seed for _ in range(3)}
    assert len(drawn) == 3 and all(isinstance(s, int) for s in drawn)
    assert given.seeded().layout == run_layout(4) and Auditor(seed=9).seeded().seed == 9


def rewrite_manifest(folder: Path, change) -> None:
    """The demo manifest of the study in ``folder`` written again with ``change`` applied to each record (its
    metadata kept), as a forger would."""
    path = folder / LAYOUT4.path("manifest", dataset="demo")
    meta = read_metadata(path)
    records = [change(r) for r in read_manifest(path)]
    write_manifest(path, records, "demo", meta["classes"], meta["n_excluded"], meta["revisions"])


@pytest.mark.workflow
def test_a_manifest_naming_a_file_out_of_the_study_or_no_regular_file_is_refused_before_any_image_is_read(
    sealed: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """The study's images moved out of it and the manifest pointed at them (``..``, an absolute path, a symlink out),
    at /proc or at a FIFO: each file refused, nothing hashed; with --images the manifest's paths are never read."""
    folder = copy_study(sealed, tmp_path / "study")
    images = folder / LAYOUT4.path("images", dataset="demo")
    outside = Path(shutil.move(images, tmp_path / "outside"))
    hashed: list[Path] = []
    monkeypatch.setattr(audit_sample, "sha256_file", lambda p: hashed.append(Path(p)) or sha256_file(p))
    originals = {r.image_id: r.path for r in read_manifest(folder / LAYOUT4.path("manifest", dataset="demo"))}
    for path in (
        lambda r: f"../outside/{Path(r.path).name}",
        lambda r: str(outside / Path(r.path).name),
        lambda r: "/proc/self/pagemap",  # hashing it would read 256 GB
    ):
        rewrite_manifest(folder, lambda r, path=path: dataclasses.replace(r, path=path(r)))
        audited = audit_one(folder, LITE0)
        assert (audited.checked, audited.mismatches) == (0, []), audited
        assert "leads out of the study" in audited.refused, audited
    rewrite_manifest(folder, lambda r: dataclasses.replace(r, path=f"../outside/{Path(r.path).name}"))
    assert main(["audit", str(folder), "--limit", "4", "--sample", "1", "--seed", "5", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert out.count("NOT AUDITED") == 6 and "6 of 6 files failed the audit" in out
    rewrite_manifest(folder, lambda r: dataclasses.replace(r, path=originals[r.image_id]))
    images.mkdir()
    for image in sorted(outside.iterdir()):  # the study's images links out of it
        (images / image.name).symlink_to(image)
    assert "leads out of the study" in audit_one(folder, LITE0).refused
    for link in sorted(images.iterdir()):  # the images back in the study, the first a FIFO (which blocks its reader)
        link.unlink()
        shutil.copy(outside / link.name, link)
    first = folder / next(iter(originals.values()))
    first.unlink()
    os.mkfifo(first)
    assert "is not a regular file" in audit_one(folder, LITE0).refused
    assert hashed == []  # no image was read, in the study or out of it
    assert audit_one(folder, LITE0, images=(outside,)).clean  # your copy: found by content, the study's files unread
    links = tmp_path / "links"
    links.mkdir()
    for image in outside.iterdir():
        (links / image.name).symlink_to(image)
    mismatches = audit_one(folder, LITE0, images=(links,)).mismatches  # links out of your folder: skipped
    assert len(mismatches) == N and all("was not found in your --images folders" in m for m in mismatches)


def swap_image(sealed: Path, folder: Path) -> str:
    """A copy of the study whose image of lite0's first sampled row was replaced by its mirror image, its sha256
    rewritten in the manifest and lite0's original predictions recomputed from it honestly, every hash resealed;
    returns the image's id."""
    copy_study(sealed, folder)
    swapped = pq.read_table(folder / LITE0)["image_id"][sampled(LITE0)[0]].as_py()
    manifest = folder / LAYOUT4.path("manifest", dataset="demo")
    path = folder / next(r.path for r in read_manifest(manifest) if r.image_id == swapped)
    ImageOps.mirror(Image.open(path).convert("RGB")).save(path)
    rewrite_manifest(folder, lambda r: dataclasses.replace(r, sha256=sha256_file(path)) if r.image_id == swapped else r)
    meta = read_metadata(folder / LITE0)
    settings = InferenceSettings(
        device="cpu", precision="fp32", num_workers=0, threads=2, store_top5=True, resize_backend="pil"
    )
    with contextlib.chdir(folder):
        predict_to_file(
            LITE0,
            LITE0.replace(".parquet", ".aggregates.parquet"),
            read_manifest(manifest),
            recorded_spec(meta["model"]),
            ZoomGrid(meta["scales"]),
            settings,
            "demo",
        )
    reseal(folder)
    return swapped


@pytest.mark.workflow
def test_an_image_swapped_with_its_rows_recomputed_fails_with_your_copy_of_the_dataset_and_passes_without(
    sealed: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "swapped"
    swapped = swap_image(sealed, folder)
    _, problems = study_rows(folder, "swapped", check=True, layout=LAYOUT4)
    assert problems == []  # the seal and --verify pass: the numbers follow from the predictions
    assert audit_one(folder, LITE0).clean  # without --images the study's own file is believed
    yours = sealed / LAYOUT4.path("images", dataset="demo")  # an untouched copy of the dataset
    audited = audit_one(folder, LITE0, images=(yours,))
    table = pq.read_table(folder / LITE0)["image_id"].to_pylist()
    hits = [k for k in sampled(LITE0) if table[k] == swapped]
    assert len(audited.mismatches) == len(hits) >= 1 and not audited.clean, audited
    assert all("was not found in your --images folders" in m for m in audited.mismatches)


@pytest.mark.workflow
def test_a_relabelled_manifest_resealed_passes_the_leaderboard_and_the_audit_which_says_labels_are_not_checked(
    sealed: Path, tmp_path: Path, capsys
) -> None:
    folder = copy_study(sealed, tmp_path / "relabelled")
    rewrite_manifest(folder, lambda r: dataclasses.replace(r, labels=[0], wnids=wnids_of([0])))
    reseal(folder)
    assert main(["leaderboard", "--limit", "4", "--verify", str(folder)]) == 0
    yours = sealed / LAYOUT4.path("images", dataset="demo")  # even your copy of the images leaves labels unchecked
    args = ["--limit", "4", "--sample", "1", "--seed", "5", "--device", "cpu", "--images", str(yours)]
    assert main(["audit", str(folder), *args]) == 0
    out = capsys.readouterr().out
    assert f"not checked: {NOT_CHECKED[0]}" in out and "all 6 files audited clean" in out
    assert read_json(folder / LAYOUT4.path("audit"))["not_checked"] == list(NOT_CHECKED)
    assert audit_one(folder, LITE0).clean  # and without --images


@pytest.mark.parametrize(
    "args, message",
    [
        (["audit", "--seed=-1"], "zoomeval audit: --seed: -1 is no seed; give a whole number S >= 0"),
        (["audit", "--device", "nonsense"], "zoomeval audit: --device: 'nonsense' is no torch device"),
        (["leaderboard", "--audit", "1", "--seed=-1"], "zoomeval leaderboard: --seed: -1 is no seed"),
        (["audit", "--device", "cpu"], "zoomeval audit: "),  # no seal (or a file that fails it): nothing audited
    ],
)
def test_a_bad_seed_device_or_study_is_one_line_naming_it_exit_2_before_any_file_is_read(
    args: list[str], message: str, tmp_path: Path, capsys
) -> None:
    assert main([*args, str(tmp_path)]) == 2  # an empty folder: a good seed and device reach its missing seal
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(message) and err.count("\n") == 1, err
    assert ("an audit needs a sealed study" in err) == (message == "zoomeval audit: ")


def test_each_test_the_docs_cite_for_a_check_is_a_test_here() -> None:
    """Each ``tests/<file>.py::<test>`` that the audit's pages name as showing a claim is a test of that file."""
    cited = {
        cite
        for doc in ("docs/how-to/audit.md", "docs/reference/cli.md")
        for cite in re.findall(r"(test_\w+\.py)::(test_\w+)", (ROOT / doc).read_text())
    }
    wrong_class = "test_a_wrong_prediction_changed_to_another_wrong_class_passes_verify_and_is_caught"
    assert ("test_audit.py", wrong_class) in cited, cited
    assert [c for c in cited if f"\ndef {c[1]}(" not in (ROOT / "tests" / c[0]).read_text()] == []


@pytest.mark.workflow
@pytest.mark.parametrize("entry", ["architecture", "checkpoint"])
def test_a_resealed_model_record_naming_a_path_creates_links_and_hashes_nothing(sealed, tmp_path, entry) -> None:
    """Prediction metadata forged to name a checkpoint model whose architecture is a path out of the study, or whose
    checkpoint is a file of the auditor's own (pinned by its sha256): that file is refused in one line, and nothing
    is created out of the study, nor linked, copied or hashed into its resources (zoomeval.inference.recorded)."""
    outside, own = tmp_path / "outside", tmp_path / "own.pth"
    outside.mkdir()
    own.write_bytes(b"the auditor's private file")
    sha = sha256_file(own)
    meta = read_metadata(sealed / LITE0)
    meta["model"] = {
        **meta["model"],
        "source": "checkpoint",
        "architecture": "../" * 12 + str(outside / "X") if entry == "architecture" else "mobilenet_v3_small",
        "weights": sha,
        "checkpoint": {"path": str(own)},
        "weights_sha256": sha,
    }
    folder = forge(sealed, tmp_path / "forged", LITE0, lambda table: table, meta)
    resources = sorted(p for p in (folder / "resources").rglob("*"))
    audited = audit_one(folder, LITE0)
    why = "is not a name" if entry == "architecture" else f"no weights file with sha256 {sha[:12]} under"
    assert audited.refused and why in audited.refused and "\n" not in audited.refused, audited
    assert list(outside.iterdir()) == [] and sorted(p for p in (folder / "resources").rglob("*")) == resources


def test_recomputing_zoom_rows_imports_no_torchvision() -> None:
    """torchvision (about 2 s: its package imports its models and torch's compiler) is imported by an audit only
    where a standard-evaluation file is recomputed, whose transform it builds."""
    code = "import sys, zoomeval.audit.study, zoomeval.inference.recompute; print('torchvision' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
