"""The paper's Table 5 (Taesiri et al. 2023, Sec. 4.7): top-1 accuracy of test-time adaptation with MEMO on AugMix
views against MEMO on RandomResizedCrop views, beside the baseline, with the seconds per image and the paper's
numbers.

Rows are (method, model) with one column per dataset, then one ``all`` row per method: its per-dataset mean over
the models and the mean and (sample) standard deviation over all its cells, as the paper reports them ("mean ±
std over the 15 cells"); ``diff_baseline`` is a row's mean minus the ``none`` row's over the same cells.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from zoomeval.core.config import TTA_METHODS as METHODS
from zoomeval.core.io import read_metadata, write_csv, write_text
from zoomeval.core.layout import run_layout
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.report.left_out import append_left_out_by_dataset, left_out_note
from zoomeval.report.tables import markdown_table

#: The paper's columns, recognised by the dataset's adapter.
PAPER_DATASETS = {
    "imagenet_val": "IN",
    "imagenet_a": "IN-A",
    "imagenet_r": "IN-R",
    "imagenet_sketch": "IN-S",
    "objectnet": "ON",
}
#: Table 5 of the paper (top-1 %), columns in the order of PAPER_DATASETS.
PAPER_TABLE_5: dict[tuple[str, str], tuple[float, ...]] = {
    ("none", "resnet50"): (76.13, 0.00, 36.17, 24.09, 35.92),
    ("none", "deepaugment_augmix"): (75.82, 3.87, 46.77, 32.62, 34.81),
    ("none", "moex_cutmix"): (79.04, 7.97, 35.52, 23.96, 38.59),
    ("memo_augmix", "resnet50"): (77.27, 0.83, 41.28, 27.63, 38.38),
    ("memo_augmix", "deepaugment_augmix"): (76.27, 5.35, 50.79, 35.70, 36.42),
    ("memo_augmix", "moex_cutmix"): (79.38, 11.21, 40.65, 27.07, 40.62),
    ("memo_rrc", "resnet50"): (77.50, 1.31, 40.81, 27.53, 38.85),
    ("memo_rrc", "deepaugment_augmix"): (76.38, 5.76, 50.88, 35.65, 36.64),
    ("memo_rrc", "moex_cutmix"): (79.49, 13.61, 40.41, 26.80, 41.43),
}
#: The paper's seconds per image (its Tab. A4, hardware not stated).
PAPER_SECONDS = {"memo_augmix": 1.15, "memo_rrc": 0.65}
METHOD_NAMES = {"none": "Baseline (1-crop)", "memo_augmix": "MEMO + AugMix", "memo_rrc": "MEMO + RRC"}
ALL = "all"


@dataclass(frozen=True)
class TTAResult:
    """One tta file scored against its manifest."""

    method: str
    model: str
    dataset: str
    n_images: int
    accuracy: float  # percent
    seconds: float  # sum over the images
    device: str
    settings: dict[str, Any]


def score_tta(path: str | os.PathLike[str], records: Sequence[Record]) -> TTAResult:
    """Top-1 accuracy of a tta file (a prediction is correct if it is any of the image's labels)."""
    meta = read_metadata(path)
    if meta.get("kind") != "tta" or meta.get("schema_version") != 1:
        raise ValueError(f"{path}: not a tta file of schema version 1; rerun its tta job")
    table = pq.read_table(path)
    if table["image_id"].to_pylist() != [r.image_id for r in records]:
        raise ValueError(f"{path}: its images are not those of dataset {meta['dataset']!r}'s manifest; rerun its job")
    correct = sum(p in r.labels for p, r in zip(table["pred"].to_pylist(), records, strict=True))
    return TTAResult(
        meta["method"],
        meta["model"]["name"],
        meta["dataset"],
        len(records),
        100 * correct / len(records),
        sum(table["seconds"].to_pylist()),
        meta["device"],
        meta["settings"],
    )


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def _fmt(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def table_tta_rows(
    results: Sequence[TTAResult], adapters: dict[str, str], paper_models: dict[str, str]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The datasets in column order and the rows: (method, model) rows, then an ``all`` row per method; each row
    holds ``cells`` and ``paper`` (dataset -> percent or None), ``mean``, ``std``, ``diff_baseline``,
    ``seconds_per_image`` and their ``paper_`` counterparts."""
    datasets = list(dict.fromkeys(r.dataset for r in results))
    models = list(dict.fromkeys(r.model for r in results))
    by_key = {(r.method, r.model, r.dataset): r for r in results}

    def paper(method: str, model: str, dataset: str) -> float | None:
        values = PAPER_TABLE_5.get((method, paper_models.get(model, "")))
        column = list(PAPER_DATASETS).index(adapters[dataset]) if adapters.get(dataset) in PAPER_DATASETS else None
        return None if values is None or column is None else values[column]

    rows: list[dict[str, Any]] = []
    for method in (m for m in METHODS if any(r.method == m for r in results)):
        per_method = []
        for model in models:
            found = [by_key[(method, model, d)] for d in datasets if (method, model, d) in by_key]
            if found:
                per_method.append(_row(method, model, datasets, found, paper))
        rows += per_method
        found = [r for r in results if r.method == method]
        rows.append(_row(method, ALL, datasets, found, paper))
    baseline = {row["model"]: row for row in rows if row["method"] == "none"}
    for row in rows:
        base = baseline.get(row["model"])
        for prefix in ("", "paper_"):
            ours, theirs = row[f"{prefix}mean"], base[f"{prefix}mean"] if base else None
            row[f"{prefix}diff_baseline"] = None if ours is None or theirs is None else ours - theirs
    return datasets, rows


def _row(method: str, model: str, datasets: list[str], found: list[TTAResult], paper: Any) -> dict[str, Any]:
    cells = {d: [r.accuracy for r in found if r.dataset == d] for d in datasets}
    papers = [paper(method, r.model, r.dataset) for r in found]
    paper_cells = {d: [p for r, p in zip(found, papers, strict=True) if r.dataset == d] for d in datasets}
    mean, std = _mean_std([r.accuracy for r in found])
    complete = all(p is not None for p in papers)
    paper_mean, paper_std = _mean_std([p for p in papers if p is not None]) if complete else (None, None)
    images = sum(r.n_images for r in found)
    return {
        "method": method,
        "model": model,
        "cells": {d: statistics.fmean(v) if v else None for d, v in cells.items()},
        "paper": {d: statistics.fmean(v) if v and None not in v else None for d, v in paper_cells.items()},
        "mean": mean,
        "std": std,
        "seconds_per_image": sum(r.seconds for r in found) / images,
        "paper_mean": paper_mean,
        "paper_std": paper_std,
        "paper_seconds_per_image": PAPER_SECONDS.get(method) if model == ALL else None,
        "devices": sorted({r.device for r in found}),
        "settings": found[0].settings,
    }


def _csv_row(row: dict[str, Any], datasets: Sequence[str], stats: Sequence[str]) -> list[str]:
    """A row's CSV cells: ours, then the paper's."""
    return [
        row["method"],
        row["model"],
        *(_fmt(row["cells"][d]) for d in datasets),
        *(_fmt(row[s]) for s in stats),
        _fmt(row["seconds_per_image"], 3),
        *(_fmt(row["paper"][d]) for d in datasets),
        *(_fmt(row[f"paper_{s}"]) for s in stats),
        _fmt(row["paper_seconds_per_image"], 2),
    ]


def _both(ours: str, theirs: str) -> str:
    return f"{ours} ({theirs})" if theirs else ours


def _spread(row: dict[str, Any], prefix: str) -> str:
    mean, std = _fmt(row[f"{prefix}mean"]), _fmt(row[f"{prefix}std"])
    return f"{mean} ± {std}" if mean and std else mean


def _markdown_row(row: dict[str, Any], datasets: Sequence[str]) -> list[str]:
    """A row's Markdown cells: each ours (the paper's)."""
    return [
        METHOD_NAMES[row["method"]],
        row["model"],
        *(_both(_fmt(row["cells"][d]), _fmt(row["paper"][d])) for d in datasets),
        _both(_spread(row, ""), _spread(row, "paper_")),
        _both(_fmt(row["diff_baseline"]), _fmt(row["paper_diff_baseline"])) if row["method"] != "none" else "",
        _both(_fmt(row["seconds_per_image"], 3), _fmt(row["paper_seconds_per_image"], 2)),
    ]


def write_table_tta(
    results: Sequence[TTAResult],
    adapters: dict[str, str],
    paper_models: dict[str, str],
    csv_path: str | os.PathLike[str],
    md_path: str | os.PathLike[str],
    left_out: Mapping[str, LeftOut],
    limit: int | None = None,
) -> None:
    """The table's CSV and Markdown; ``adapters`` maps each dataset to its adapter, ``paper_models`` (config
    ``tta.paper_models``) the config's models to the paper's rows, ``left_out`` each dataset to the images its
    manifest left out (the tta jobs score every image of it) and ``limit`` is the run's (config ``limit``)."""
    datasets, rows = table_tta_rows(results, adapters, paper_models)
    stats = ["mean", "std", "diff_baseline"]
    header = [
        "method",
        "model",
        *datasets,
        *stats,
        "seconds_per_image",
        *(f"paper_{d}" for d in datasets),
        *(f"paper_{s}" for s in stats),
        "paper_seconds_per_image",
    ]
    lefts, layout = {d: left_out[d] for d in datasets}, run_layout(limit)
    body = [_csv_row(row, datasets, stats) for row in rows]
    write_csv(csv_path, *append_left_out_by_dataset(header, body, lefts, layout))
    shown = [_markdown_row(row, datasets) for row in rows]
    names = [f"{d} ({PAPER_DATASETS[adapters[d]]})" if adapters.get(d) in PAPER_DATASETS else d for d in datasets]
    lines = [
        "# Table 5: test-time adaptation with MEMO on AugMix and on RandomResizedCrop views, top-1 accuracy (%)",
        "",
        "Each cell: ours (the paper's, where the config maps the model with tta.paper_models).",
        "",
        *markdown_table(["method", "model", *names, "mean ± std", "Δ baseline", "s/image"], shown),
        "",
        "all: the per-dataset mean over the models, and the mean ± sample standard deviation over all cells of the "
        "method. s/image: wall time per image from decoding to prediction, measured in this run on "
        + ", ".join(sorted({d for row in rows for d in row["devices"]}))
        + " (the paper's: its Tab. A4, hardware not stated).",
        "",
        left_out_note(lefts, layout),
        "",
    ]
    write_text(md_path, "\n".join([*lines, *_settings_lines(rows)]) + "\n")


def _settings_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per MEMO method with the settings it ran with."""
    lines = []
    for row in rows:
        if row["model"] == ALL and row["method"] != "none":
            s = row["settings"]
            where = "also" if s["prior_at_prediction"] else "not"
            lines.append(
                f"{METHOD_NAMES[row['method']]}: K = {s['views']} views, {s['steps']} SGD step(s), "
                f"lr {s['lr']}, BatchNorm prior N = {s['prior_strength']} ({where} at the prediction), "
                f"seed {s['seed']}."
            )
    return lines
