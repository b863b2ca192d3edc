"""The ImageNet-Hard table: each model's standard-evaluation accuracy on ImageNet-Hard, by origin, beside its zoom
upper bound and the accuracy the dataset card reports.

The card's numbers (README of ``taesiri/imagenet-hard``, 10,980 images) were measured by the authors' notebooks:
torchvision models (EfficientNet-B0 and -B7 included) with Resize(256) + CenterCrop(224) and ImageNet mean/std,
EfficientNet-L2-NS (timm) with Resize(800) + CenterCrop(800), CLIP with its own preprocess and OpenCLIP with
open_clip's; correct if the argmax is any of the image's labels. The card's "VGG-16" row came from a VGG-19 run
(11.99 in the notebook). The six models of the zoom study selected the images (they fail on them under every zoom
transform), so their accuracy here is low by construction; the table marks them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zoomeval.analysis.metrics import Metrics
from zoomeval.core.io import write_csv, write_text
from zoomeval.core.layout import run_layout
from zoomeval.report.left_out import append_left_out, left_out_note
from zoomeval.report.published import Weights, published
from zoomeval.report.tables import (
    ANCHORS,
    STANDARD_NOTE,
    _percent,
    _with_interval,
    lefts,
    markdown_table,
    percent_interval,
)

#: The card's classifier table and the paper's Table 1 (whose models are the zoom study's), in published.yaml.
CARD_TABLE = next(t for t in published() if t.source == "ImageNet-Hard card")
ZOOM_STUDY_TABLE = next(t for t in published() if (t.source, t.column) == ("paper, Table 1", "IN"))
#: Images in the card's (final) release.
CARD_IMAGES = CARD_TABLE.protocol.n_images


@dataclass(frozen=True)
class CardRow:
    """One row of the card's classifier table and the config models it describes."""

    name: str
    accuracy: float
    models: frozenset[Weights]
    note: str = ""


CARD: tuple[CardRow, ...] = tuple(
    CardRow(row.name, row.values["acc_standard"], row.models, row.note) for row in CARD_TABLE.rows
)
#: The six classifiers of the zoom study, whose failures under every zoom transform selected ImageNet-Hard.
STUDY_MODELS: frozenset[Weights] = frozenset().union(*(row.models for row in ZOOM_STUDY_TABLE.rows))
COLUMNS = [
    "dataset",
    "model",
    "selection",
    "n_images",
    "acc_standard",
    "acc_1crop",
    "acc_max",
    "card_model",
    "card_accuracy",
    "card_diff",
]
ORIGIN_PREFIX = "acc_standard:"


def identity(entry: Mapping[str, Any]) -> Weights:
    return (entry["source"], entry["architecture"], entry["weights"])


def card_row(entry: Mapping[str, Any]) -> CardRow | None:
    return next((row for row in CARD if identity(entry) in row.models), None)


def imagenet_hard_rows(
    metrics: Sequence[Metrics],
    models: Mapping[str, Mapping[str, Any]],
    intervals: bool = False,
    limit: int | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per (dataset, model) of the original images, then the standard evaluation's
    accuracy per origin (one column per origin, sorted), the scales searched and what the row leaves out
    (``intervals``: each accuracy with its 95 % Wilson interval over its images, the Markdown's; ``limit``: the
    run's, whose results root the left-out column names files under)."""
    original = [m for m in metrics if m.variant == "original"]
    origins = sorted({o for m in original for o in (m.by_origin or {})})
    shown = _with_interval if intervals else lambda m, c: _percent(getattr(m, c))
    rows = []
    for m in original:
        row = card_row(models[m.model])
        selection = "study" if identity(models[m.model]) in STUDY_MODELS else "held_out"
        diff = None if row is None or m.acc_standard is None else m.acc_standard - row.accuracy
        by_origin = m.by_origin or {}
        rows.append(
            [
                m.dataset,
                m.model,
                selection,
                str(m.n_images),
                *(shown(m, c) for c in COLUMNS[4:7]),
                row.name if row else "",
                f"{row.accuracy:.2f}" if row else "",
                "" if diff is None else f"{diff:+.2f}",
                *(
                    _origin_cell(by_origin[o], f"{m.model} {m.dataset}: {ORIGIN_PREFIX}{o}", intervals)
                    if o in by_origin
                    else ""
                    for o in origins
                ),
                str(m.n_transforms // ANCHORS),
            ]
        )
    header = [*COLUMNS, *(f"{ORIGIN_PREFIX}{o}" for o in origins), "n_scales"]
    return append_left_out(header, rows, [m.left_out for m in original], run_layout(limit))


def _origin_cell(cell: Mapping[str, float | int | None], what: str, intervals: bool) -> str:
    """The standard evaluation's accuracy on one origin's images (``cell``, of ``by_origin``), with its interval
    over them if ``intervals``."""
    value = cell["acc_standard"]
    return percent_interval(value, int(cell["n_images"] or 0), what) if intervals else _percent(value)


def write_table_imagenet_hard(
    metrics: Sequence[Metrics],
    models: Mapping[str, Mapping[str, Any]],
    csv_path: str | os.PathLike[str],
    md_path: str | os.PathLike[str],
    limit: int | None = None,
) -> None:
    header, rows = imagenet_hard_rows(metrics, models, limit=limit)
    write_csv(csv_path, header, rows)
    _, md_rows = imagenet_hard_rows(metrics, models, intervals=True, limit=limit)
    study = [r for r in md_rows if r[2] == "study"]
    held_out = [r for r in md_rows if r[2] != "study"]
    lines = ["# ImageNet-Hard: top-1 accuracy (%) of the standard evaluation, beside the dataset card", ""]
    for title, group in (
        ("Models that never saw the selection", held_out),
        ("Models of the zoom study, which selected the images", study),
    ):
        if group:
            lines += [f"## {title}", "", *markdown_table(header, group), ""]
    sizes = sorted({m.n_images for m in metrics if m.variant == "original"})
    scales = sorted({m.n_transforms // ANCHORS for m in metrics if m.variant == "original"})
    notes = [
        "Correct if the argmax is any of the image's labels, over all images. acc_max: the zoom upper bound (some "
        "zoom transform classifies the image correctly); card_accuracy: the dataset card's number "
        f"({CARD_IMAGES:,} images), card_diff = acc_standard - card_accuracy. Accuracies with their 95 % Wilson "
        "interval [low, high] over n_images, or over the origin's images for acc_standard:{origin}. Scales searched "
        f"(n_scales): {', '.join(map(str, scales))}. " + STANDARD_NOTE,
    ]
    if any(n != CARD_IMAGES for n in sizes):
        notes.append(
            f"This run has {', '.join(map(str, sizes))} images, the card {CARD_IMAGES:,}: card_diff compares "
            "different image sets."
        )
    used = {row.name: row.note for row in CARD if row.note and any(r[7] == row.name for r in rows)}
    notes += [f"{name}: {note}." for name, note in used.items()]
    notes.append(left_out_note(lefts([m for m in metrics if m.variant == "original"]), run_layout(limit)))
    write_text(md_path, "\n".join([*lines, *notes, ""]))
