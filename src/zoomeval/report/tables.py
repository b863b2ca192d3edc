"""The tables, written from typed metrics: Table A8 (maximum possible top-1 accuracy on original, object-only and
background-only images), Table 1, the zoom-group table and the aggregation table. Each appends what it leaves
out (:mod:`zoomeval.report.left_out`)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zoomeval.analysis.comparability import digest
from zoomeval.analysis.metrics import METRICS_KEYS, Metrics
from zoomeval.analysis.stats import accuracy_interval
from zoomeval.core.cells import markdown_cell
from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.io import write_csv, write_text
from zoomeval.core.layout import declare, run_layout
from zoomeval.core.left_out import LeftOut
from zoomeval.core.zoom import AGGREGATION_METHODS, AGGREGATION_RULES
from zoomeval.report.left_out import LEFT_OUT_COLUMNS, append_left_out, append_left_out_by_dataset, left_out_note

#: Where a table is written (a CSV or Markdown file).
FilePath = str | os.PathLike[str]

#: The metrics' fields from the model to the cover gap, then acc_standard (appended in metrics schema 3, after the
#: columns that were there before), architecture (the model's resolved arch.tag, beside its config name in
#: ``model``) and n_scales (the scales searched).
TABLE_A8_COLUMNS = [*METRICS_KEYS[: METRICS_KEYS.index("cover_gap") + 1], "acc_standard", "architecture", "n_scales"]
#: Zoom transforms per scale (3 x 3 anchors): n_transforms = 9 x the number of scales.
ANCHORS = 9
PERCENT_COLUMNS = {"acc_1crop", "acc_top_k", "acc_max", "acc_standard"}
#: The paper's 1-crop and the standard evaluation, for the tables' notes (docs/explanations/standard-eval.md).
STANDARD_NOTE = (
    "acc_standard: the standard evaluation, each model once per image through its own evaluation transform "
    "(torchvision weights' preset, timm's data config, open_clip's preprocess; original images only). It is not "
    "acc_1crop, the zoom pipeline at S=256 with bicubic resizing and the integer centre anchor."
)


def _percent(value: float | None, base: float | None = None) -> str:
    """``74.35``, or with ``base`` ``74.35 (-1.40)`` (the difference to the 1-crop cell); empty when undefined."""
    if value is None or math.isnan(value):
        return ""
    return f"{value:.2f}" if base is None else f"{value:.2f} ({value - base:+.2f})"


def _cell(column: str, value: Any) -> str:
    return _percent(value) if column in PERCENT_COLUMNS else str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The one Markdown table writer: each cell made safe (:func:`zoomeval.core.cells.markdown_cell`)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(map(markdown_cell, cells)) + " |"

    return [line(header), "|" + "---|" * len(header), *map(line, rows)]


def write_table(
    csv_path: FilePath,
    md_path: FilePath,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str],
    md_rows: Sequence[Sequence[str]] | None = None,
) -> None:
    """A table as CSV, and as Markdown (``md_rows``, default the CSV's) under ``# title`` followed by a paragraph per
    note."""
    write_csv(csv_path, header, rows)
    lines = [f"# {title}", "", *markdown_table(header, rows if md_rows is None else md_rows), ""]
    write_text(md_path, "\n".join(lines + [line for note in notes for line in (note, "")]))


def class_subsets(metrics: Iterable[Metrics]) -> str:
    """What a title adds for the datasets scored over fewer than the 1000 classes (``class_set: subset``, a label
    set of fewer classes): each one's number of classes and the chance level of a random guess among them."""
    subsets = {m.dataset: m.n_classes for m in metrics if 0 < m.n_classes < NUM_CLASSES}
    parts = [f"{name} over {n} of the {NUM_CLASSES} classes, chance {100 / n:.2f} %" for name, n in subsets.items()]
    return f" [scored {'; '.join(parts)}]" if parts else ""


def titled(title: str, metrics: Sequence[Metrics], limit: int | None) -> str:
    """A table's title with what its rows scored (:func:`class_subsets`) and whether its run was limited."""
    return limited(title + class_subsets(metrics), limit)


def limited(title: str, limit: int | None) -> str:
    """A table's title, saying so when its run was limited to the first ``limit`` images of each dataset."""
    if limit is None:
        return title
    return f"{title} [LIMITED RUN: the first {limit} images of each dataset only (config limit), not a result]"


def lefts(metrics: Sequence[Metrics]) -> dict[str, LeftOut | None]:
    """What the rows of each dataset (scored name) leave out, for :func:`left_out_note`."""
    return {m.dataset: m.left_out for m in metrics}


def table_a8_rows(
    metrics: Sequence[Metrics], architectures: Mapping[str, str] | None = None, intervals: bool = False
) -> list[list[str]]:
    """Formatted rows (percent with 2 decimals; an absent 1-crop transform gives an empty cell); ``architectures``:
    each model's resolved ``arch.tag`` (empty where not given); ``intervals``: each accuracy with its 95 % Wilson
    interval (the Markdown's)."""
    names, cell = architectures or {}, _with_interval if intervals else lambda m, c: _cell(c, getattr(m, c))
    return [
        [cell(m, c) for c in TABLE_A8_COLUMNS[:-2]] + [names.get(m.model, ""), str(m.n_transforms // ANCHORS)]
        for m in metrics
    ]


def percent_interval(value: float | None, n: int, what: str) -> str:
    """``41.67 [19.33, 68.05]``: an accuracy (percent) and its 95 % Wilson interval over ``n`` images (``what``
    names it if it is no count of them); as :func:`_percent` where undefined or ``n`` is 0."""
    if value is None or math.isnan(value) or not n:
        return _percent(value)
    low, high = accuracy_interval(value, n, what)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def _with_interval(m: Metrics, column: str) -> str:
    """An accuracy column of ``m`` with its interval over the row's images (:func:`percent_interval`)."""
    value = getattr(m, column)
    if column not in PERCENT_COLUMNS:
        return _cell(column, value)
    return percent_interval(value, m.n_images, f"{m.model} {m.variant} {m.dataset}: {column}")


#: The image variants in words, in this order, for the titles (what was run, not what could be).
VARIANT_WORDS = {"original": "original", "fgset": "object-only (fgset)", "bgset": "background-only (bgset)"}


def variant_words(variants: Iterable[str]) -> str:
    """``original, object-only (fgset) and background-only (bgset)``: the variants that rows hold, in words."""
    present = set(variants)
    words = [w for v, w in VARIANT_WORDS.items() if v in present] + sorted(present - VARIANT_WORDS.keys())
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def write_table_a8(
    metrics: Sequence[Metrics],
    csv_path: FilePath,
    md_path: FilePath,
    architectures: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> None:
    notes = [
        "acc_1crop: S=256 at the centre anchor; acc_top_k: union of the first top_k greedy-cover transforms; "
        "acc_max: union of all transforms; cover_size: greedy minimum set cover size (the paper's); "
        "cover_size_exact: minimum set cover (HiGHS, see cover.json for its status and dual bound); "
        "cover_gap: cover_size - cover_size_exact; architecture: the model's architecture and weights tag as its "
        "source resolved them (model is its name in the config); n_scales: the scales searched. Accuracies here with "
        "their 95 % Wilson interval [low, high] over n_images. " + STANDARD_NOTE
    ]
    title = f"Table A8: maximum possible top-1 accuracy (%) on {variant_words(m.variant for m in metrics)} images"
    title = titled(title, metrics, limit)
    left = [m.left_out for m in metrics]
    layout = run_layout(limit)
    header, rows = append_left_out(TABLE_A8_COLUMNS, table_a8_rows(metrics, architectures), left, layout)
    _, md_rows = append_left_out(TABLE_A8_COLUMNS, table_a8_rows(metrics, architectures, intervals=True), left, layout)
    rows = [[*row, *provenance_cells(m)] for row, m in zip(rows, metrics, strict=True)]
    md_rows = [[*row, *provenance_cells(m, 12)] for row, m in zip(md_rows, metrics, strict=True)]
    write_table(
        csv_path,
        md_path,
        title,
        [*header, *PROVENANCE_COLUMNS],
        rows,
        [*notes, PROVENANCE_NOTE, left_out_note(lefts(metrics), layout)],
        md_rows,
    )


#: What a row was computed under, appended to the tables of one row per result: the digest of its comparability key
#: (metrics.json's ``key``). Not the files' sha256 (in metrics.json, study.json and the leaderboard): a prediction
#: file records its own timing, so two identical runs differ there, and the tables stay byte-reproducible.
PROVENANCE_COLUMNS = ("key_sha256",)
PROVENANCE_NOTE = (
    "key_sha256: the digest of the row's comparability key (metrics.json's key: dataset and images scored, class "
    "and label set, variant, scales, resizing, model and weights, normalisation, precision, compile settings, top_k, "
    "zoomeval version and commit, the exact cover's node limit); rows that share it are comparable. The Markdown "
    "shows its first 12 digits; empty for metrics written before schema 5."
)


def provenance_cells(metrics: Metrics, digits: int = 64) -> list[str]:
    """The :data:`PROVENANCE_COLUMNS` of a row (their first ``digits`` digits)."""
    return ["" if metrics.key is None else digest(metrics.key)[:digits]]


#: Table 1's panels: (a) 1-crop accuracy, (b) the top-k greedy-cover upper bound, (c) the upper bound over every
#: transform, and (s) the standard evaluation (appended after (c) in the CSV; shown beside (a) in the Markdown).
TABLE_1_PANELS = (
    ("a", "acc_1crop", "1 crop"),
    ("b", "acc_top_k", "top-k greedy cover"),
    ("c", "acc_max", "all"),
    ("s", "acc_standard", "standard evaluation (each model's own transform)"),
)
TABLE_1_MARKDOWN_ORDER = ("a", "s", "b", "c")


def table_1_rows(metrics: Sequence[Metrics], intervals: bool = False) -> tuple[list[str], list[list[str]]]:
    """Table 1 from the metrics of the original images: one row per (panel, model), datasets as columns
    (``intervals``: each model's accuracy with its 95 % Wilson interval, the Markdown's).

    Panels (b) and (c) start with the "Random" row: the chance that N random guesses include the right
    class, ``min(100, 100 N / n_classes)`` with N = ``top_k`` or the number of transforms.
    """
    shown = _with_interval if intervals else lambda m, c: _cell(c, getattr(m, c))
    original = [m for m in metrics if m.variant == "original"]
    datasets = list(dict.fromkeys(m.dataset for m in original))
    models = list(dict.fromkeys(m.model for m in original))
    cell = {(m.model, m.dataset): m for m in original}
    first = {d: next(m for m in original if m.dataset == d) for d in datasets}
    rows = []
    for panel, column, _ in TABLE_1_PANELS:
        if panel in ("b", "c"):
            guesses = {d: first[d].top_k if panel == "b" else first[d].n_transforms for d in datasets}
            rows.append(
                [panel, "Random"] + [f"{min(100.0, 100 * guesses[d] / first[d].n_classes):.2f}" for d in datasets]
            )
        for model in models:
            rows.append(
                [panel, model] + [shown(cell[(model, d)], column) if (model, d) in cell else "" for d in datasets]
            )
    return ["panel", "model", *datasets], rows


def write_table_1(metrics: Sequence[Metrics], csv_path: FilePath, md_path: FilePath, limit: int | None = None) -> None:
    header, rows = table_1_rows(metrics)
    left = lefts([m for m in metrics if m.variant == "original"])
    write_csv(csv_path, *append_left_out_by_dataset(header, rows, left, run_layout(limit)))
    _, md_rows = table_1_rows(metrics, intervals=True)
    title = titled("Table 1: top-1 accuracy (%) with 1 crop, and upper bounds over zoom transforms", metrics, limit)
    lines = [f"# {title}", ""]
    titles = {panel: title for panel, _, title in TABLE_1_PANELS}
    for panel in TABLE_1_MARKDOWN_ORDER:
        lines += [
            f"({panel}) {titles[panel]}",
            "",
            *markdown_table(header[1:], [row[1:] for row in md_rows if row[0] == panel]),
        ]
        lines.append("")
    scales = sorted({m.n_transforms // ANCHORS for m in metrics if m.variant == "original"})
    lines += [
        f"Scales searched: {', '.join(map(str, scales))}. Accuracies with their 95 % Wilson interval [low, high] "
        "over the dataset's images.",
        "",
        STANDARD_NOTE,
        "",
        left_out_note(left, run_layout(limit)),
        "",
    ]
    write_text(md_path, "\n".join(lines))


ZOOM_GROUP_COLUMNS = ["ub_in", "ub_out", "ub_224", "excl_in", "excl_out", "excl_224"]


def write_table_zoom_groups(
    metrics: Sequence[Metrics], csv_path: FilePath, md_path: FilePath, limit: int | None = None
) -> None:
    """The paper's zoom-group table: zoom-in / zoom-out / zoom-224 upper bounds within each model's own
    greedy cover, and the share of images each group alone solves."""
    header = ["model", "variant", "dataset", *ZOOM_GROUP_COLUMNS, "top_k_centre_share"]
    rows = [
        [
            m.model,
            m.variant,
            m.dataset,
            *(f"{m.zoom_groups[c]:.2f}" for c in ZOOM_GROUP_COLUMNS),
            _percent(m.top_k_centre_share),
        ]
        for m in metrics
    ]
    header, rows = append_left_out(header, rows, [m.left_out for m in metrics], run_layout(limit))
    shares = [m.top_k_centre_share for m in metrics if m.variant == "original"]
    shares = [x for x in shares if x is not None and not math.isnan(x)]
    title = "Zoom-in (S > 224), zoom-out (S < 224) and zoom-224 transforms within each model's greedy cover (%)"
    notes = [
        "ub_*: images solved by at least one cover transform of the group; excl_*: images that group solves and "
        "neither other group does; top_k_centre_share: share of the first top_k greedy picks at the centre "
        "anchor (uniform: 11.11).",
        left_out_note(lefts(metrics), run_layout(limit)),
    ]
    if shares:
        notes.append(
            f"Average top_k_centre_share over the original images: {sum(shares) / len(shares):.2f} "
            f"({len(shares)} model x dataset pairs; the paper reports 26.65)."
        )
    write_table(csv_path, md_path, titled(title, metrics, limit), header, rows, notes)


TABLE_AGGREGATION_COLUMNS = [
    "model",
    "dataset",
    "n_images",
    "acc_1crop",
    *(f"{m}_{r}" for m in AGGREGATION_METHODS for r in AGGREGATION_RULES),
    "acc_standard",
]
declare("table_a8", [*TABLE_A8_COLUMNS, *LEFT_OUT_COLUMNS, *PROVENANCE_COLUMNS])
declare("table_aggregation", [*TABLE_AGGREGATION_COLUMNS, *LEFT_OUT_COLUMNS])


def _aggregation_values(m: Metrics) -> list[float | None]:
    aggregation = m.aggregation or {}
    return [
        aggregation[method][rule] if method in aggregation else None
        for method in AGGREGATION_METHODS
        for rule in AGGREGATION_RULES
    ]


def write_table_aggregation(
    metrics: Sequence[Metrics], csv_path: FilePath, md_path: FilePath, limit: int | None = None
) -> None:
    """The paper's aggregation table: groups of views aggregated into one prediction per image.

    One row per (model, dataset) of the original images: 1-crop accuracy and each aggregation method's
    accuracy by the max and the mean rule (empty where the scales give the method no view)."""
    original = [m for m in metrics if m.variant == "original"]
    rows, shown = [], []
    for m in original:
        first = [m.model, m.dataset, str(m.n_images), _percent(m.acc_1crop)]
        values = [*_aggregation_values(m), m.acc_standard]
        rows.append(first + [_percent(v) for v in values])
        shown.append(first + [_percent(v, m.acc_1crop) for v in values])
    left, layout = [m.left_out for m in original], run_layout(limit)
    header, rows = append_left_out(TABLE_AGGREGATION_COLUMNS, rows, left, layout)
    _, shown = append_left_out(TABLE_AGGREGATION_COLUMNS, shown, left, layout)
    title = "Top-1 accuracy (%) of aggregation methods on the original images (difference to 1-crop)"
    notes = [
        "zoom_in / zoom_out / zoom_224: every zoom transform with S > 224 / S < 224 / S = 224 (all nine anchors); "
        "five_crop: the four corner 224 crops of the image resized to S = 256 and the 1-crop transform; "
        "ten_crop: those five and their horizontal mirror images. max: the prediction of the view with the "
        "highest softmax probability; mean: the argmax of the mean softmax over the views. " + STANDARD_NOTE,
        left_out_note(lefts(original), layout),
    ]
    write_table(csv_path, md_path, titled(title, original, limit), header, rows, notes, shown)
