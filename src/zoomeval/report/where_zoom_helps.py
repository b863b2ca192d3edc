"""results/table_where_zoom_helps.csv/.md: the 1-crop accuracy, acc_max and the best label-free policy's held-out
accuracy at a fixed budget of the original images by object-size decile and by centre-distance band
(:mod:`zoomeval.analysis.where_zoom_helps`), per scored dataset with boxes and model."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from zoomeval.analysis.matrix import read_matrix
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.policy_choices import best_policy, read_choices
from zoomeval.analysis.where_zoom_helps import (
    CENTRE_EDGES,
    NO_BOX,
    SCHEMA_VERSION,
    policy_correctness,
    where_zoom_helps,
)
from zoomeval.core.layout import declare, run_layout
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import read_manifest
from zoomeval.report.left_out import LEFT_OUT_COLUMNS, append_left_out, left_out_note
from zoomeval.report.tables import write_table

#: The table's columns (its SCHEMA_VERSION), in this order, then the left-out columns
#: (:mod:`zoomeval.report.left_out`).
COLUMNS = [
    "model",
    "variant",
    "dataset",
    "axis",
    "bin",
    "lo",
    "hi",
    "n_images",
    "n_1crop",
    "acc_1crop",
    "acc_1crop_lo",
    "acc_1crop_hi",
    "n_max",
    "acc_max",
    "acc_max_lo",
    "acc_max_hi",
    "policy",
    "budget",
    "n_policy",
    "acc_policy",
    "acc_policy_lo",
    "acc_policy_hi",
]
declare("table_where_zoom_helps", [*COLUMNS, *LEFT_OUT_COLUMNS], SCHEMA_VERSION)
#: One scored dataset and model: (model, dataset, what its metrics leave out, the analysis's rows, images with no box).
Cell = tuple[str, str, LeftOut | None, list[dict[str, Any]], int]
_EDGES = {"lo", "hi"}  # fractions, 6 decimals; the accuracies are percentages, 2 decimals


def _text(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column in _EDGES:
        return f"{value:.6f}"
    return f"{round(value, 2) + 0.0:.2f}" if isinstance(value, float) else str(value)


def read_cell(model: str, scored: str, paths: Sequence[str | os.PathLike[str]], budget: int) -> Cell:
    """One scored dataset's and model's cell, from ``paths``: its manifest, correctness matrix, metrics.json and
    policy choices; the best policy at ``budget`` views (every view where it exceeds the transforms, as the policies
    job's budgets do: policy_eval.budgets_for)."""
    manifest, matrix_path, metrics, choices = paths
    matrix, order, image_ids = read_matrix(matrix_path)
    budget = min(budget, len(order))
    table, _ = read_choices(choices)
    best = best_policy(table, budget)
    if best is None and table.num_rows:
        raise ValueError(
            f"{choices}: no policy at budget {budget} (where_zoom_helps.budget); add it to policies.budgets"
        )
    rows, no_box = where_zoom_helps(
        read_manifest(manifest), matrix, order, image_ids, policy_correctness(best, image_ids)
    )
    named = {"policy": None if best is None else best[0], "budget": budget}
    return model, scored, read_metrics(metrics).left_out, [{**r, **named} for r in rows], no_box


def table_rows(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """The table's rows from ``(model, dataset, left_out, rows, n_no_box)`` per scored dataset and model (the
    original images): images without a box join the left-out images, counted under :data:`NO_BOX`."""
    out = []
    for model, dataset, left, rows, no_box in cells:
        if no_box:
            left = left or LeftOut(dataset)
            left = replace(left, unscored=None if left.unscored is None else {**left.unscored, NO_BOX: no_box})
        out += [{"model": model, "variant": "original", "dataset": dataset, **r, "left": left} for r in rows]
    return out


def write_table_where_zoom_helps(
    cells: Sequence[Cell], csv_path: str | os.PathLike[str], md_path: str | os.PathLike[str], limit: int | None = None
) -> None:
    """The CSV and the Markdown (the same cells, every one escaped by the table writer) with the notes; ``limit``:
    the run's (config limit), whose results root the left-out column names files under."""
    rows = table_rows(cells)
    lefts, layout = [r["left"] for r in rows], run_layout(limit)
    header, body = append_left_out(COLUMNS, [[_text(c, r[c]) for c in COLUMNS] for r in rows], lefts, layout)
    bands = ", ".join(f"({a}, {b}]" for a, b in zip(CENTRE_EDGES, CENTRE_EDGES[1:], strict=False))
    notes = [
        f"Schema version {SCHEMA_VERSION}. Original images only. Each image's object is its largest box; axis size: "
        "the box's area over the image's, in deciles over the dataset's n scored images with a box (edge k: the "
        "sorted sizes' element at index floor((n - 1) k / 10); bin k holds lo < value <= hi, the first bin also its "
        "lo; on equal edges an image falls in the lowest bin, the others stay empty); axis centre: the box centre's "
        f"distance from the image centre over the half-diagonal, bands {bands} (the first also 0).",
        "acc_1crop: the 1-crop view (S = 256, centre); acc_max: any of the transforms; acc_policy: the label-free "
        "policy named in policy, the most accurate over all the dataset's images at budget views per image "
        "(cross-validated, each image scored by the policy fitted on the other folds; the same policy in every bin; "
        "empty where the policies were not fitted); all in % of the bin's images with Wilson 95 % intervals (empty "
        "for an empty bin); n_1crop, n_max, n_policy: the images they classify correctly.",
        left_out_note({r["dataset"]: r["left"] for r in rows}, layout),
    ]
    title = "Where zoom helps: 1-crop, best policy and acc_max by object size and centre distance"
    write_table(csv_path, md_path, title, header, body, notes)


#: The axes' panels: (axis, x label).
PANELS = (
    ("size", "largest box's area / image area (deciles)"),
    ("centre", "box centre's distance from the image centre / half-diagonal"),
)


def _tick(r: Mapping[str, Any]) -> str:
    edges = "no box" if r["lo"] is None else f"{r['lo']:.2g}-{r['hi']:.2g}"
    return f"{edges} (n={r['n_images']})"


def plot_where_zoom_helps(cells: Sequence[Cell], path: str | os.PathLike[str], title: str) -> None:
    """PNG of one scored dataset: a panel per axis, per model acc_1crop (solid), acc_max (dashed) and the best
    policy (dotted, named in the legend with its budget) per bin with their Wilson 95 % intervals as error bars; empty
    bins are not drawn; each tick says the bin's edges and images."""
    from matplotlib.figure import Figure  # here: the table job, which imports this module too, draws nothing

    from zoomeval.report.figures import _save

    rows = table_rows(cells)
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    for k, (axis, label) in enumerate(PANELS):
        ax = fig.add_subplot(1, 2, k + 1)
        mine = [r for r in rows if r["axis"] == axis]
        for colour, model in enumerate(dict.fromkeys(r["model"] for r in mine)):
            shown = [r for r in mine if r["model"] == model and r["n_images"]]
            best = f"{shown[0]['policy']} ({shown[0]['budget']} views)" if shown and shown[0]["policy"] else None
            for series, (key, style) in enumerate((("1crop", "-"), ("max", "--"), ("policy", ":"))):
                if key == "policy" and best is None:
                    continue  # the policies were not fitted
                ys = [r[f"acc_{key}"] for r in shown]
                err = [
                    [y - r[f"acc_{key}_lo"] for y, r in zip(ys, shown, strict=True)],
                    [r[f"acc_{key}_hi"] - y for y, r in zip(ys, shown, strict=True)],
                ]
                shift = 0.05 * (3 * colour + series)  # side by side, so that the error bars do not hide each other
                name = f"{model} {best}" if key == "policy" else f"{model} acc_{key}"
                ax.errorbar(
                    [r["bin"] + shift for r in shown],
                    ys,
                    yerr=err,
                    fmt=style,
                    marker="o",
                    markersize=3,
                    capsize=2,
                    color=f"C{colour}",
                    label=name,
                )
        first = [r for r in mine if r["model"] == mine[0]["model"]] if mine else []
        ax.set_xticks([r["bin"] for r in first], [_tick(r) for r in first], fontsize=7, rotation=35, ha="right")
        ax.set_xlabel(label)
        ax.set_ylabel("top-1 accuracy (%)")
        ax.set_ylim(-2, 102)
    fig.axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.suptitle(title)
    _save(fig, path)
