"""Drawing the paper's figures from what :mod:`zoomeval.report.figure_data` computes: the per-anchor upper
bounds, the scale curves, the top-k pick locations, the centre-bias heatmaps, the 1 -> top-k -> all and variant
comparisons, and the object-count distributions.

Every heatmap is drawn in image orientation: anchor row 0 at the top. (The original center-bias heatmaps used
``origin="lower"`` and so showed the grid upside down.) Figures are built on ``matplotlib.figure.Figure``
without pyplot, so no global backend state is touched, and the PNGs are byte-stable: fixed dpi, no
``Software`` tag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from zoomeval.analysis.cover_breakdown import TopKLocations
from zoomeval.core.io import atomic_path
from zoomeval.core.zoom import ONE_CROP
from zoomeval.masks.boxes import VARIANTS
from zoomeval.report.figure_data import CountShares, ScaleCurves, UpperBounds

DPI = 120
#: The center-bias heatmaps' colormap: white -> pale green -> ForestGreen.
GREENS = LinearSegmentedColormap.from_list("center_bias", ["white", (0.9, 0.98, 0.9), "forestgreen"])
UNIFORM_SHARE = 100 / 9  # the centre share if the picks were spread evenly over the 9 anchors


def _save(fig: Figure, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> None:
    # By default no "Software" tag (it carries the matplotlib version) and a fixed dpi: the same figure, the
    # same bytes.
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None} if metadata is None else metadata)


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


def plot_upper_bounds(bounds: UpperBounds, path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`~zoomeval.report.figure_data.upper_bounds`: one line per model over 1 crop, top-k, all."""
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for model, ys in bounds.lines:
        ax.plot(range(3), ys, marker="o", label=model)
    ax.set_xticks(range(3), ["1 crop", f"top-{bounds.top_k}", "all"])
    ax.set_xlim(-0.3, 2.3)
    ax.set_ylabel("top-1 accuracy / upper bound (%)")
    ax.set_title(title)
    ax.legend(title="model", fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))  # outside: never hides a line
    _save(fig, path)


def plot_variant_bars(acc: Mapping[tuple[str, str], float], path: str | os.PathLike[str], title: str) -> None:
    """PNG of grouped bars of :func:`~zoomeval.report.figure_data.variant_accuracy`: per model, ``acc_max`` on
    each variant it has (original, fgset, bgset)."""
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


def plot_count_distributions(shares: CountShares, path: str | os.PathLike[str], title: str) -> None:
    """PNG of :func:`~zoomeval.report.figure_data.count_shares`: one step histogram per dataset."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for label, values in shares.shares.items():
        ax.stairs(values, shares.edges, label=label, linewidth=1.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("objects per image")
    ax.set_ylabel("share of images")
    ax.set_title(title)
    ax.legend()
    _save(fig, path, metadata={})  # matplotlib's default tag, as this figure has always been written
