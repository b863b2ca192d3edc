"""zoomeval leaderboard: study directories merged into one table, every number recomputed from the metrics.json
files, Wilson intervals by hand and by scipy, incomparable rows kept apart, the HTML page sorted in Chromium."""

import csv
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from scipy.stats import binomtest

from tests.chromium import CHROMIUM, Chromium
from zoomeval.analysis.metrics import Metrics, metrics_document, read_metrics
from zoomeval.analysis.stats import wilson_interval
from zoomeval.core.io import write_json, write_parquet
from zoomeval.report.leaderboard import ACCURACIES, COLUMNS, study_rows

N = 12
SCALES = [64, 224, 256]


def metrics(model: str, dataset: str, variant: str = "original", **correct: int) -> Metrics:
    """Metrics of ``N`` images with ``correct[<accuracy>]`` of them right."""
    counts = {"acc_standard": 4, "acc_1crop": 5, "acc_top_k": 7, "acc_max": 8, **correct}
    return Metrics(
        model=model, variant=variant, dataset=dataset, n_images=N, cover_size=3, cover_size_exact=2, cover_gap=1,
        zoom_groups={}, top_k_centre_share=None, n_transforms=9 * len(SCALES), n_classes=1000, n_excluded=0,
        by_origin=None, aggregation=None, top_k=3, **{k: 100 * v / N for k, v in counts.items()},
    )  # fmt: skip


def add(study: Path, m: Metrics, dataset: str, scales=SCALES, param_count: int = 4_652_008) -> None:
    """One analysed (dataset, variant, model) of a study: its metrics.json and its prediction files' metadata."""
    write_json(study / f"results/analysis/{m.dataset}/{m.variant}/{m.model}/metrics.json", metrics_document(m))
    (study / "results/datasets" / dataset).mkdir(parents=True, exist_ok=True)
    spec = {"architecture": "resnet50", "weights": "a1_in1k", "weights_sha256": "ab" * 32, "param_count": param_count}
    meta = {"model": spec, "scales": scales, "crop_size": 224, "zoomeval": "0.1.0", "zoomeval_commit": "c0ffee",
            "torch": "2.14.1", "device": "cpu", "precision": "fp32", "resize_backend": "pil"}  # fmt: skip
    table = pa.table({"image_id": ["a"]})
    write_parquet(study / f"results/predictions/{dataset}/{m.variant}/{m.model}.parquet", table, meta)
    geometry = {"img_size": 224, "crop_pct": 0.95, "interpolation": "bicubic"}
    write_parquet(study / f"results/standard/{dataset}/{m.model}.parquet", table, {"geometry": geometry})


@pytest.fixture
def studies(tmp_path: Path) -> list[Path]:
    """Study a: two models on the demo and ReaL-scored ImageNet; b: r50 again with other numbers, and the same
    numbers for r18; c: the demo at two scales (not comparable with a and b)."""
    a, b, c = (tmp_path / name for name in "abc")
    add(a, metrics("r50", "demo"), "demo")
    add(a, metrics("r18", "demo", acc_1crop=3, acc_max=9), "demo")
    add(a, metrics("r50", "imagenet_real", acc_1crop=12, acc_standard=0), "imagenet")
    add(b, metrics("r50", "demo", acc_1crop=6), "demo")
    add(b, metrics("r18", "demo", acc_1crop=3, acc_max=9), "demo")
    add(c, replace(metrics("r50", "demo"), n_transforms=18), "demo", scales=[64, 256])
    return [a, b, c]


def zoomeval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zoomeval", *args], capture_output=True, text=True)


def test_wilson_interval_by_hand_and_as_scipy_computes_it() -> None:
    # k = 5 of n = 12, z = 1.95996: centre (5 + z²/2) / (12 + z²) = 6.92073 / 15.84146 = 0.43688, half-width
    # z / (12 + z²) * sqrt(5 * 7 / 12 + z²/4) = 0.123723 * 1.969019 = 0.243613
    low, high = wilson_interval(5, 12)
    assert (round(low, 4), round(high, 4)) == (0.1933, 0.6805)
    # ImageNet-A's 7,500 images at 50 %: about +-1.1 points
    assert [round(x, 4) for x in wilson_interval(3750, 7500)] == [0.4887, 0.5113]
    for k, n in [(0, 12), (12, 12), (1, 1), (7, 50), (49_000, 50_000)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(13, 12)


def test_every_number_of_the_csv_is_recomputed_from_the_metrics_files(studies, tmp_path) -> None:
    proc = zoomeval("leaderboard", *map(str, studies), "-o", str(tmp_path / "board.csv"))
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "board.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(COLUMNS)
    assert len(rows) == 6
    for row in rows:
        scored = row["dataset"] if row["label_set"] == "in" else f"{row['dataset']}_{row['label_set']}"
        path = tmp_path / row["study"] / "results/analysis" / scored / row["variant"] / row["model"] / "metrics.json"
        m = read_metrics(path)
        assert row["n_images"] == str(m.n_images) and row["cover_size"] == str(m.cover_size)
        assert row["cover_size_exact"] == str(m.cover_size_exact)
        for column in ACCURACIES:
            value = getattr(m, column)
            assert row[column] == f"{value:.2f}", (row["study"], column)
            ci = binomtest(round(value * m.n_images / 100), m.n_images).proportion_ci(method="wilson")
            assert (row[f"{column}_lo"], row[f"{column}_hi"]) == (f"{100 * ci.low:.2f}", f"{100 * ci.high:.2f}")
        meta = json.loads(json.dumps({"scales": [64, 256] if row["study"] == "c" else SCALES}))
        assert (row["n_scales"], json.loads(row["scales"])) == (str(len(meta["scales"])), meta["scales"])
        assert (row["param_count"], row["img_size"], row["crop_pct"], row["interpolation"]) == ("4.65", "224", "0.95",
                                                                                               "bicubic")  # fmt: skip
        assert (row["zoomeval_commit"], row["weights_sha256"], row["architecture"]) == ("c0ffee", "ab" * 32,
                                                                                        "resnet50.a1_in1k")  # fmt: skip
    real = [r for r in rows if r["label_set"] == "real"]
    assert [(r["study"], r["dataset"], r["acc_1crop"], r["acc_standard_lo"]) for r in real] == [
        ("a", "imagenet", "100.00", "0.00")
    ]


def test_incomparable_rows_are_kept_apart_and_other_studies_numbers_reported(studies, tmp_path) -> None:
    assert zoomeval("leaderboard", *map(str, studies), "-o", str(tmp_path / "board.csv")).returncode == 0
    with open(tmp_path / "board.csv") as fh:
        rows = [(r["group"], r["study"], r["model"], r["acc_1crop"], r["note"]) for r in csv.DictReader(fh)]
    three = "demo / original / in: 12 images, 3 scales, crop 224, top_k 3"
    two = "demo / original / in: 12 images, 2 scales, crop 224, top_k 3"
    apart = "kept apart from the rows with scales [64, 256] (not [64, 224, 256])"
    # best acc_1crop first within a group; r50 of a and b differ (5 vs 6 of 12), r18 agrees
    assert rows[:4] == [
        (three, "b", "r50", "50.00", f"{apart}; other numbers than study a"),
        (three, "a", "r50", "41.67", f"{apart}; other numbers than study b"),
        (three, "a", "r18", "25.00", f"{apart}; same numbers as study b"),
        (three, "b", "r18", "25.00", f"{apart}; same numbers as study a"),
    ]
    # the other group of the demo next, then ImageNet scored with ReaL
    assert rows[4] == (two, "c", "r50", "41.67", "kept apart from the rows with scales [64, 224, 256] (not [64, 256])")
    assert rows[5] == ("imagenet / original / real: 12 images, 3 scales, crop 224, top_k 3", "a", "r50", "100.00", "")
    text = zoomeval("leaderboard", *map(str, studies)).stdout
    assert f"## {three}" in text and f"## {two}" in text
    assert "| r50 | b | 33.33 [13.81, 60.94] | 50.00 [25.38, 74.62] |" in text


def test_a_studys_rows_can_be_limited_to_the_metrics_files_it_names(studies) -> None:
    a = studies[0]
    everything = study_rows(a, "a")
    assert [(r["dataset"], r["model"]) for r in everything] == [("demo", "r18"), ("demo", "r50"), ("imagenet", "r50")]
    named = [a / "results/analysis/imagenet_real/original/r50/metrics.json"]
    assert study_rows(a, "a", named) == everything[2:]


def test_a_limited_runs_rows_are_read_under_its_own_results_root(studies, tmp_path) -> None:
    """A limited run's tree (``results/limit-2``, as the study's leaderboard rule passes it): its datasets and
    prediction files are read there; the default root, which holds none, is refused."""
    expected = study_rows(studies[0], "a")
    limited = tmp_path / "limited"
    (limited / "results").mkdir(parents=True)
    (studies[0] / "results").rename(limited / "results" / "limit-2")
    assert study_rows(limited, "a", results="results/limit-2") == expected
    named = [limited / "results/limit-2/analysis/demo/original/r50/metrics.json"]
    assert study_rows(limited, "a", named, "results/limit-2") == expected[1:2]
    with pytest.raises(ValueError, match=r"no results/analysis/\*/\*/\*/metrics.json"):
        study_rows(limited, "a")


def test_a_percentage_that_is_no_count_and_a_study_without_results_are_refused(studies, tmp_path) -> None:
    path = studies[0] / "results/analysis/demo/original/r50/metrics.json"
    document = json.loads(path.read_text())
    document["acc_max"] = 50.1
    path.write_text(json.dumps(document))
    proc = zoomeval("leaderboard", str(studies[0]))
    assert proc.returncode == 2 and f"{path}: acc_max 50.1 is not a count of 12 images" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = zoomeval("leaderboard", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "no results/analysis/*/*/*/metrics.json; run the study's workflow" in proc.stderr
    assert "written as .csv, .md, .html" in zoomeval("leaderboard", str(studies[1]), "-o", "x.txt").stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_html_page_sorts_offline_in_chromium(studies, tmp_path) -> None:
    page = tmp_path / "board.html"
    assert zoomeval("leaderboard", *map(str, studies[:2]), "-o", str(page)).returncode == 0
    assert "http" not in page.read_text()  # nothing to fetch
    models = "[...document.querySelector('table').tBodies[0].rows].map(r => r.cells[0].textContent + r.cells[1]" \
        ".textContent + ':' + r.cells[{}].textContent)"
    column = list(COLUMNS[1:]).index("acc_max")
    header = f"document.querySelector('table').tHead.rows[0].cells[{column}]"
    with Chromium(tmp_path / "profile") as chrome:
        chrome.open(page.as_uri())
        chrome.wait_for("document.body?.dataset.ready === '1'")
        assert chrome.evaluate(models.format(column)) == ["br50:66.67", "ar50:66.67", "ar18:75.00", "br18:75.00"]
        chrome.evaluate(f"{header}.click()")  # descending first
        assert chrome.evaluate(models.format(column))[:2] == ["ar18:75.00", "br18:75.00"]
        chrome.evaluate(f"{header}.click()")
        assert [m.split(":")[1] for m in chrome.evaluate(models.format(column))] == ["66.67", "66.67", "75.00",
                                                                                     "75.00"]  # fmt: skip
        assert chrome.errors == []
