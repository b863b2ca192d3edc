"""``results/table_multilabel.csv`` / ``.md``: multi-label accuracy (Shankar et al. 2020) beside top-1, top-5 and
ImageNet-M accuracy and the class slices, per model and dataset, and a summary that recomputes Shankar et al.'s
effects for the configured models beside their published numbers."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence

from zoomeval.analysis.class_groups import SOURCE as GROUPS_SOURCE
from zoomeval.analysis.multilabel_scores import MultilabelScores
from zoomeval.core.layout import declare, run_layout
from zoomeval.report.left_out import LEFT_OUT_COLUMNS, append_left_out, left_out_note
from zoomeval.report.tables import ANCHORS, _percent, markdown_table, percent_interval

SLICES = ("objects", "organisms", "no_dogs")
COLUMNS = [
    "model",
    "dataset",
    "n_images",
    "n_annotated",
    "n_problematic",
    "n_scored",
    "acc_top1",
    "acc_top5",
    "acc_multilabel",
    "acc_multilabel_top_k",
    "acc_multilabel_max",
    "n_imagenet_m",
    "acc_imagenet_m",
    *(f"{prefix}_{name}" for name in SLICES for prefix in ("n", "acc")),
    "notes",
    "n_scales",
]
declare("table_multilabel", [*COLUMNS, *LEFT_OUT_COLUMNS])
NO_TOP5 = "acc_top5: the predictions were stored without top5 (set inference.store_top5: true)"
NO_IMAGENET_M = "acc_imagenet_m: no ImageNet-M image in this dataset (its 68 images are ImageNet val images)"
#: Shankar et al. 2020's effects (ImageNet val, 72 models; val -> V2 for models and humans), as (effect, number).
SEED = {
    "multilabel_minus_top1": "+8.9 (median of 72 models, ImageNet val)",
    "top5_minus_multilabel": "+7.4 (median of 72 models, ImageNet val: multi-label is 7.4 below top-5)",
    "val_to_v2_drop": "5 to 8 points for models; humans within 1",
}
VAL_ONLY = "(reported for ImageNet val only)"


def _row(s: MultilabelScores, intervals: bool = False) -> list[str]:
    """The CSV's row, or with ``intervals`` the Markdown's: each accuracy with its 95 % Wilson interval over its
    images (n_scored, n_imagenet_m or the slice's)."""

    def acc(column: str, value: float | None, n: int) -> str:
        return percent_interval(value, n, f"{s.model} {s.dataset}: {column}") if intervals else _percent(value)

    notes = [NO_TOP5] if s.acc_top5 is None else []
    if s.acc_imagenet_m is None:
        notes.append(NO_IMAGENET_M)
    notes += [f"acc_{name}: no image of this slice" for name in SLICES if s.slices[name][1] is None]
    c, n = s.coverage, s.n_scored
    slices = [
        cell
        for name in SLICES
        for n_slice, value in [s.slices[name]]
        for cell in (str(n_slice), acc(f"acc_{name}", value, n_slice))
    ]
    return [
        s.model,
        s.dataset,
        str(c.n_images),
        str(c.n_annotated),
        str(c.n_problematic),
        str(n),
        acc("acc_top1", s.acc_top1, n),
        acc("acc_top5", s.acc_top5, n),
        acc("acc_multilabel", s.acc_multilabel, n),
        acc("acc_multilabel_top_k", s.acc_multilabel_top_k, n),
        acc("acc_multilabel_max", s.acc_multilabel_max, n),
        str(c.n_imagenet_m),
        acc("acc_imagenet_m", s.acc_imagenet_m, c.n_imagenet_m),
        *slices,
        "; ".join(notes),
        str(s.n_transforms // ANCHORS),
    ]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):+.2f} (median of {len(values)} model{'s' * (len(values) != 1)})"


def summary(scores: Sequence[MultilabelScores], adapters: dict[str, str]) -> list[list[str]]:
    """Shankar et al.'s effects recomputed for the configured models: rows (effect, dataset(s), here, theirs)."""
    rows = []
    datasets = list(dict.fromkeys(s.dataset for s in scores))
    for d in datasets:
        here = [s for s in scores if s.dataset == d]
        is_val = adapters[d] == "imagenet_val"
        rows.append(
            [
                "multi-label - top-1",
                d,
                _median([s.acc_multilabel - s.acc_top1 for s in here]),
                SEED["multilabel_minus_top1"] if is_val else VAL_ONLY,
            ]
        )
        top5 = [s.acc_top5 - s.acc_multilabel for s in here if s.acc_top5 is not None]
        rows.append(
            [
                "top-5 - multi-label",
                d,
                _median(top5) if len(top5) == len(here) else NO_TOP5.split(": ")[1],
                SEED["top5_minus_multilabel"] if is_val else VAL_ONLY,
            ]
        )
    for val in (d for d in datasets if adapters[d] == "imagenet_val"):
        for v2 in (d for d in datasets if adapters[d] == "imagenet_v2"):
            by_model = {s.model: s.acc_multilabel for s in scores if s.dataset == val}
            drops = [by_model[s.model] - s.acc_multilabel for s in scores if s.dataset == v2 and s.model in by_model]
            if drops:
                here = f"{_median(drops)}, from {min(drops):.2f} to {max(drops):.2f}"
                rows.append(["multi-label drop, val -> V2", f"{val} -> {v2}", here, SEED["val_to_v2_drop"]])
    return rows


def write_table_multilabel(
    scores: Sequence[MultilabelScores],
    adapters: dict[str, str],
    csv_path: str | os.PathLike[str],
    md_path: str | os.PathLike[str],
    limit: int | None = None,
) -> None:
    """The table (one row per model and dataset) as CSV, and as Markdown with its definitions and the summary;
    ``adapters`` gives each dataset's adapter (which datasets are ImageNet val, which ImageNet-V2); ``limit``: the
    run's (config limit), whose results root the left-out column names files under."""
    from zoomeval.core.io import write_csv, write_text

    left, layout = [s.left_out for s in scores], run_layout(limit)
    header, rows = append_left_out(COLUMNS, [_row(s) for s in scores], left, layout)
    write_csv(csv_path, header, rows)
    _, md_rows = append_left_out(COLUMNS, [_row(s, intervals=True) for s in scores], left, layout)
    top_k = sorted({s.top_k for s in scores})
    scales = sorted({s.n_transforms // ANCHORS for s in scores})
    lines = [
        "# Multi-label accuracy (Shankar et al. 2020) beside top-1, top-5 and ImageNet-M, 1 crop (%)",
        "",
        *markdown_table(header, md_rows),
        "",
        "n_scored: annotated images that are not problematic, the images of acc_top1, acc_top5, acc_multilabel and "
        "the slices. acc_top1: the prediction is the original ImageNet label; acc_top5: the original label is among "
        "the 5 highest logits; acc_multilabel: the prediction is a label the annotators judged correct; "
        f"acc_multilabel_top_k / acc_multilabel_max: correct under multi-label labels for at least one of the first "
        f"{'/'.join(map(str, top_k))} greedy-cover transforms / any transform. acc_imagenet_m: the n_imagenet_m "
        "ImageNet-M images, problematic or not, correct if the prediction is judged correct or unclear. Slices (by "
        f"the image's original label; multi-label accuracy): objects, organisms and no_dogs, from {GROUPS_SOURCE}. "
        "Each accuracy with its 95 % Wilson interval [low, high] over its images: n_scored, n_imagenet_m or the "
        f"slice's (n_objects, n_organisms, n_no_dogs). n_scales: the scales searched ({', '.join(map(str, scales))}).",
        "",
        left_out_note({s.dataset: s.left_out for s in scores}, layout),
        "",
        "## Shankar et al. 2020's effects, recomputed for these models",
        "",
        *markdown_table(["effect", "dataset", "here (points)", "Shankar et al. 2020"], summary(scores, adapters)),
        "",
        "Their numbers are over their own evaluation images with the 2020 annotations; the published "
        "human_accuracy_v3.0.0.json includes later corrections (Vasudevan et al. 2022), so equal numbers are not "
        "expected, only effects of the same sign and size.",
        "",
    ]
    write_text(md_path, "\n".join(lines))
