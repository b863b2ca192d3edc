"""What the paper's figures show, computed from a correctness matrix, its greedy cover and the metrics, apart
from drawing them (:mod:`zoomeval.report.figures`).

``matrix`` is a boolean ``(len(order), n_images)`` array whose row ``i`` says which images transform ``order[i]``
classifies correctly; ``cover`` holds the greedy cover's transform indices in pick order. Grids are indexed
``[row, col]`` with anchor row 0 at the top of the image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from zoomeval.analysis.metrics import Metrics
from zoomeval.core.zoom import Transform, crop_box, resized_sizes
from zoomeval.masks.boxes import VARIANTS


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
    "visibility" data (their ``center-bias-analysis.ipynb``): the pickle that held it is not in their repository.
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
    """Per scale, the centre-anchor accuracy and the 9-anchor upper bound (the paper's accuracy-by-scale curves)."""
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


def centre_bias_grids(
    matrix: np.ndarray, order: Sequence[Transform], sizes: np.ndarray, size: int, cover: Sequence[int]
) -> dict[str, np.ndarray]:
    """The centre-bias heatmaps side by side: :func:`visibility_grid` over every transform and over the cover."""
    return {
        f"all {len(order)} transforms": visibility_grid(matrix, order, sizes, size),
        f"greedy cover ({len(cover)} transforms)": visibility_grid(matrix, order, sizes, size, cover),
    }


class UpperBounds(NamedTuple):
    """Per model, the 1 crop -> top-k -> all transforms accuracies (%) of one scored dataset."""

    top_k: int
    lines: list[tuple[str, list[float | None]]]


def upper_bounds(metrics: Sequence[Metrics]) -> UpperBounds:
    """The lines of the 1 -> top-k -> all figure, from the original images where the dataset has them."""
    rows = [m for m in metrics if m.variant == "original"] or list(metrics)
    if not rows:
        raise ValueError("the upper-bounds figure needs at least one metrics row")
    top_ks = {m.top_k for m in rows}
    if len(top_ks) != 1:
        raise ValueError(f"the metrics mix top_k values {sorted(top_ks)}; re-run the analysis with one top_k")
    return UpperBounds(top_ks.pop(), [(m.model, [m.acc_1crop, m.acc_top_k, m.acc_max]) for m in rows])


def variant_accuracy(metrics: Sequence[Metrics]) -> dict[tuple[str, str], float]:
    """``acc_max`` per (model, variant), for the grouped bars of the variants figure."""
    acc: dict[tuple[str, str], float] = {}
    for m in metrics:
        if m.variant not in VARIANTS:
            raise ValueError(f"unknown variant {m.variant!r}; expected one of {VARIANTS}")
        if (m.model, m.variant) in acc:
            raise ValueError(f"duplicate row for model {m.model!r}, variant {m.variant!r}")
        acc[(m.model, m.variant)] = float(m.acc_max)
    if not acc:
        raise ValueError("the variants figure needs at least one metrics row")
    return acc


class CountShares(NamedTuple):
    """Per dataset (labelled with its size), the share of its images with 0, 1, 2, ... objects; ``edges`` are
    the bin edges, one bin per integer count."""

    edges: np.ndarray
    shares: dict[str, np.ndarray]


def count_shares(counts: Mapping[str, Sequence[int]]) -> CountShares:
    """The object-count distributions of :func:`zoomeval.report.figures.plot_count_distributions`."""
    samples = {name: np.asarray(values, dtype=np.int64) for name, values in counts.items()}
    if not samples or any(v.size == 0 for v in samples.values()):
        raise ValueError("every dataset needs at least one object count")
    top = max(int(v.max()) for v in samples.values())
    edges = np.arange(top + 2) - 0.5  # one bin per integer count, centred on it
    shares = {f"{name} (n={v.size})": np.bincount(v, minlength=top + 1) / v.size for name, v in samples.items()}
    return CountShares(edges, shares)
