"""The paper's figures from a correctness matrix and its greedy cover (paper.md sections 5, 5b, 6 and 9a).

Inputs: ``matrix``, a boolean ``(len(order), n_images)`` array whose row ``i`` says which images transform
``order[i]`` classifies correctly, and ``cover``, the greedy cover's transform indices in pick order.

Every heatmap is drawn in image orientation: anchor row 0 at the top. (The original center-bias heatmaps used
``origin="lower"`` and so showed the grid upside down.) Figures are built on ``matplotlib.figure.Figure``
without pyplot, so no global backend state is touched, and the PNGs are byte-stable: fixed dpi, no
``Software`` tag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from zoomeval.analysis import TopKLocations
from zoomeval.io import atomic_path
from zoomeval.masks import VARIANTS
from zoomeval.zoom import ONE_CROP, Transform, crop_box, resized_sizes

DPI = 120
#: The center-bias heatmaps' colormap: white -> pale green -> ForestGreen.
GREENS = LinearSegmentedColormap.from_list("center_bias", ["white", (0.9, 0.98, 0.9), "forestgreen"])
UNIFORM_SHARE = 100 / 9  # the centre share if the picks were spread evenly over the 9 anchors
Rows = Sequence[Mapping[str, Any]]


class ScaleCurves(NamedTuple):
    """Accuracy (%) per scale, ``scales`` ascending: centre anchor only, and the union over the 9 anchors."""

    scales: list[int]
    one_crop_acc: np.ndarray
    nine_crop_ub: np.ndarray


def _checked(matrix: np.ndarray, order: Sequence[Transform]) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=bool)
    if matrix.ndim != 2 or matrix.shape[0] != len(order) or matrix.shape[1] == 0:
        raise ValueError(f"matrix must be (len(order)={len(order)}, n_images > 0), got shape {matrix.shape}")
    return matrix


def _union_acc(matrix: np.ndarray, rows: np.ndarray) -> float:
    """% of images that at least one of the selected transforms classifies correctly."""
    return 100.0 * float(matrix[rows].any(axis=0).mean())


def anchor_grid(matrix: np.ndarray, order: Sequence[Transform]) -> np.ndarray:
    """The per-anchor upper bound (3x3, %): cell (r, c) is the union over every scale at anchor (r, c)."""
    matrix = _checked(matrix, order)
    anchors = np.array([(t.row, t.col) for t in order]).reshape(-1, 2)
    grid = np.empty((3, 3))
    for r in range(3):
        for c in range(3):
            grid[r, c] = _union_acc(matrix, (anchors[:, 0] == r) & (anchors[:, 1] == c))
    return grid


def visible_anchor_points(transform: Transform, sizes: np.ndarray, size: int = 224) -> np.ndarray:
    """``(n_images, 3, 3)`` bool: does the transform's crop of image i contain the centre of the image's
    anchor region (r, c), i.e. of tile (r, c) of the original image cut into a 3 x 3 grid?

    ``sizes`` holds each image's original (width, height). This is our reading of the authors' unpublished
    "visibility" data (paper.md section 9a): the pickle that held it is not in their repository.
    """
    new_w, new_h = resized_sizes(sizes[:, 0], sizes[:, 1], transform.scale)
    left, top, right, bottom = crop_box(new_w, new_h, transform.row, transform.col, size)
    centre = (np.arange(3) + 0.5) / 3  # tile centres as a fraction of the side
    x, y = new_w[:, None] * centre, new_h[:, None] * centre  # in resized pixels, (n_images, 3)
    inside_x = (left[:, None] <= x) & (x < right[:, None])
    inside_y = (top[:, None] <= y) & (y < bottom[:, None])
    return inside_y[:, :, None] & inside_x[:, None, :]


def visibility_grid(
    matrix: np.ndarray,
    order: Sequence[Transform],
    sizes: np.ndarray,
    size: int = 224,
    rows: Sequence[int] | None = None,
) -> np.ndarray:
    """The centre-bias heatmap of the authors' ``center-bias-analysis`` notebook (3x3, %): cell (r, c) is the
    share of images that some transform solves while its crop shows anchor region (r, c) (see
    :func:`visible_anchor_points`). ``rows`` restricts the transforms, e.g. to the model's cover (default:
    all)."""
    matrix = _checked(matrix, order)
    sizes = np.asarray(sizes, dtype=np.int64).reshape(-1, 2)
    solved = np.zeros((matrix.shape[1], 3, 3), dtype=bool)
    for t in range(len(order)) if rows is None else rows:
        solved |= matrix[t][:, None, None] & visible_anchor_points(order[t], sizes, size)
    return 100.0 * solved.mean(axis=0)


def scale_curves(matrix: np.ndarray, order: Sequence[Transform]) -> ScaleCurves:
    """Per scale, the centre-anchor accuracy and the 9-anchor upper bound (paper.md 5b)."""
    matrix = _checked(matrix, order)
    index = {t: i for i, t in enumerate(order)}
    scales = sorted({t.scale for t in order})
    missing = [s for s in scales if Transform(s, 1, 1) not in index]
    if missing:
        raise ValueError(f"no centre-anchor transform for scale(s) {missing}")
    of_scale = np.array([t.scale for t in order])
    one_crop = np.array([100.0 * matrix[index[Transform(s, 1, 1)]].mean() for s in scales])
    nine_crop = np.array([_union_acc(matrix, of_scale == s) for s in scales])
    return ScaleCurves(scales, one_crop, nine_crop)


def _save(fig: Figure, path: str | os.PathLike[str]) -> None:
    # No "Software" tag (it carries the matplotlib version) and a fixed dpi: the same figure, the same bytes.
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})


def _heatmap(fig: Figure, ax: Axes, values: np.ndarray, cmap: Any, labels: list[list[str]], unit: str) -> None:
    """A 3x3 anchor heatmap, row 0 at the top, each cell labelled, with a colorbar from min to max."""
    lo, hi = float(values.min()), float(values.max())
    image = ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, origin="upper")
    for r in range(3):
        for c in range(3):
            # White text only where the cell is dark enough to need it.
            dark = hi > lo and (values[r, c] - lo) / (hi - lo) > 0.6
            ax.text(c, r, labels[r][c], ha="center", va="center", fontsize=9, color="white" if dark else "black")
    ax.set_xticks(range(3), [f"col {c}" for c in range(3)])
    ax.set_yticks(range(3), [f"row {r}" for r in range(3)])
    fig.colorbar(image, ax=ax, label=unit, shrink=0.8)


def _centre_labels(grid: np.ndarray) -> list[list[str]]:
    """Each cell's value and its difference to the centre cell, as in the authors' heatmaps."""
    return [[f"{v:.2f}\n({v - grid[1, 1]:+.2f})" for v in row] for row in grid]


def plot_anchor_grid(grid: np.ndarray, path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`anchor_grid`: each cell shows its value and its difference to the centre cell."""
    grid = np.asarray(grid, dtype=float)
    fig = Figure(figsize=(5.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    _heatmap(fig, ax, grid, GREENS, _centre_labels(grid), "% of images")
    ax.set_title(title)
    _save(fig, path)


def plot_centre_bias(grids: Mapping[str, np.ndarray], path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`visibility_grid` side by side for each named transform set (e.g. all, greedy cover)."""
    fig = Figure(figsize=(5.5 * len(grids), 4.8), layout="constrained")
    for k, (name, grid) in enumerate(grids.items()):
        ax = fig.add_subplot(1, len(grids), k + 1)
        grid = np.asarray(grid, dtype=float)
        _heatmap(fig, ax, grid, GREENS, _centre_labels(grid), "% of images")
        ax.set_title(name)
    fig.suptitle(title)
    _save(fig, path)


def plot_scale_curves(curves: ScaleCurves, path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`scale_curves` against S on a log axis, with the 1-crop scale marked."""
    scales, one_crop, nine_crop = curves
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(scales, one_crop, marker="o", markersize=3, label="centre anchor (1 crop)")
    ax.plot(scales, nine_crop, marker="o", markersize=3, label="any of 9 anchors (upper bound)")
    ax.axvline(ONE_CROP[0], color="grey", linestyle="--", linewidth=1, label=f"S = {ONE_CROP[0]}")
    ax.set_xscale("log")
    ax.set_xlabel("S (shorter side after resize, px)")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(title)
    ax.legend()
    _save(fig, path)


def plot_top_k_locations(locations: TopKLocations, path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`top_k_locations`: picks per anchor (row 0 at the top) and a histogram of their scales."""
    counts, scales, share = locations
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    grid_ax, hist_ax = fig.subplots(1, 2, width_ratios=(1, 1.3))
    _heatmap(fig, grid_ax, counts, "YlGnBu", [[str(n) for n in row] for row in counts], "picks")
    grid_ax.set_title(f"anchors of the first {len(scales)} picks\ncentre {share:.1f}% (uniform {UNIFORM_SHARE:.1f}%)")
    hist_ax.hist(scales, bins=20, color="tab:blue", edgecolor="white")  # 20 bins as in analysis-of-top-36
    hist_ax.set_xlabel("S (shorter side after resize, px)")
    hist_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    hist_ax.set_ylabel("picks")
    hist_ax.set_title("scales of the picks")
    fig.suptitle(title)
    _save(fig, path)


def plot_upper_bounds(rows: Rows, path: str | os.PathLike[str], title: str, top_k: int = 36) -> None:
    """PNG of the 1 crop -> top-k -> all transforms accuracies of one dataset, one line per model."""
    if not rows:
        raise ValueError("plot_upper_bounds needs at least one row")
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for row in rows:
        ys = [row["acc_1crop"], row["acc_top36"], row["acc_max"]]
        ax.plot(range(3), ys, marker="o", label=str(row["model"]))
    ax.set_xticks(range(3), ["1 crop", f"top-{top_k}", "all"])
    ax.set_xlim(-0.3, 2.3)
    ax.set_ylabel("top-1 accuracy / upper bound (%)")
    ax.set_title(title)
    ax.legend(title="model", fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))  # outside: never hides a line
    _save(fig, path)


def plot_variant_bars(rows: Rows, path: str | os.PathLike[str], title: str) -> None:
    """PNG of grouped bars: per model, ``acc_max`` on each variant it has (original, fgset, bgset)."""
    acc: dict[tuple[str, str], float] = {}
    for row in rows:
        key = (str(row["model"]), str(row["variant"]))
        if key[1] not in VARIANTS:
            raise ValueError(f"unknown variant {key[1]!r}; expected one of {VARIANTS}")
        if key in acc:
            raise ValueError(f"duplicate row for model {key[0]!r}, variant {key[1]!r}")
        acc[key] = float(row["acc_max"])
    if not acc:
        raise ValueError("plot_variant_bars needs at least one row")
    models = list(dict.fromkeys(model for model, _ in acc))
    width = 0.8 / len(VARIANTS)
    fig = Figure(figsize=(max(6.0, 1.2 * len(models) + 2), 4.5), layout="constrained")
    ax = fig.add_subplot()
    for j, variant in enumerate(VARIANTS):
        offset = (j - (len(VARIANTS) - 1) / 2) * width  # groups centred on the model's tick
        xs = [i + offset for i, m in enumerate(models) if (m, variant) in acc]
        if xs:
            bars = ax.bar(xs, [acc[(m, variant)] for m in models if (m, variant) in acc], width, label=variant)
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("upper bound over all transforms (%)")
    ax.set_title(title)
    ax.legend(title="variant", loc="upper left", bbox_to_anchor=(1, 1))  # outside: never hides a bar
    _save(fig, path)
