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
from zoomeval.report.tables import (
    ANCHORS,
    STANDARD_NOTE,
    _percent,
    _with_interval,
    lefts,
    markdown_table,
    percent_interval,
)

#: Images in the card's (final) release.
CARD_IMAGES = 10_980
Weights = tuple[str, str, str]  # (source, architecture, weights)


@dataclass(frozen=True)
class CardRow:
    """One row of the card's classifier table and the config models it describes."""

    name: str
    accuracy: float
    models: frozenset[Weights]
    note: str = ""


def _tv(architecture: str) -> frozenset[Weights]:
    return frozenset({("torchvision", architecture, "IMAGENET1K_V1")})


CLIP_L14 = frozenset({("open_clip", "ViT-L-14", "openai"), ("open_clip", "ViT-L-14-quickgelu", "openai")})
CARD: tuple[CardRow, ...] = (
    CardRow("AlexNet", 7.34, _tv("alexnet")),
    CardRow("VGG-16", 12.00, _tv("vgg16"), "the card's VGG-16 row; the authors' code ran VGG-19"),
    CardRow("VGG-16 (run as VGG-19)", 11.99, _tv("vgg19"), "the notebook's VGG-19 run behind the card's 12.00"),
    CardRow("ResNet-18", 10.86, _tv("resnet18")),
    CardRow("ResNet-50", 14.74, _tv("resnet50")),
    CardRow("ViT-B/32", 18.52, _tv("vit_b_32")),
    CardRow("EfficientNet-B0", 16.57, _tv("efficientnet_b0"), "16.58 in the notebook (16.5756)"),
    CardRow("EfficientNet-B7", 23.20, _tv("efficientnet_b7")),
    CardRow("EfficientNet-L2-NS", 39.00, frozenset({("timm", "tf_efficientnet_l2", "ns_jft_in1k")})),
    CardRow("CLIP-ViT-L/14@224", 1.86, CLIP_L14),
    CardRow(
        "CLIP-ViT-L/14@336",
        2.02,
        frozenset({("open_clip", "ViT-L-14-336", "openai"), ("open_clip", "ViT-L-14-336-quickgelu", "openai")}),
    ),
    CardRow("OpenCLIP ViT-bigG-14", 15.93, frozenset({("open_clip", "ViT-bigG-14", "laion2b_s39b_b160k")})),
    CardRow("OpenCLIP ViT-L-14 DataComp", 15.60, frozenset({("open_clip", "ViT-L-14", "datacomp_xl_s13b_b90k")})),
)
#: The six classifiers of the zoom study, whose failures under every zoom transform selected ImageNet-Hard.
STUDY_MODELS: frozenset[Weights] = frozenset().union(
    *(_tv(a) for a in ("alexnet", "vgg16", "resnet18", "resnet50", "vit_b_32")), CLIP_L14
)
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
