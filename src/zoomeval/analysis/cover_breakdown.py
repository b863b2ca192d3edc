"""What a model's greedy cover is made of: how much each zoom group (zoom-in, zoom-out, zoom-224) solves within
it, and where its first top_k picks sit on the 3x3 anchor grid, as in the zoom-group and top-36 analyses of
Taesiri et al. 2023 (the authors' ``disentangling.ipynb`` and ``analysis-of-top-36.ipynb``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from zoomeval.core.zoom import ZOOM_GROUPS, Transform


class TopKLocations(NamedTuple):
    """Where the first k greedy picks sit: counts per anchor (3x3), their scales, centre share in %."""

    anchor_counts: np.ndarray
    scales: list[int]
    centre_share: float


def top_k_locations(cover: Sequence[int], order: Sequence[Transform], k: int = 36) -> TopKLocations:
    """Anchors and scales of the first ``k`` greedy picks (fewer if the cover is shorter).

    ``centre_share`` is NaN for an empty cover: a share of no picks is undefined, and NaN keeps it out of
    a silent average.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    picks = [order[i] for i in cover[:k]]
    counts = np.zeros((3, 3), dtype=np.int64)
    for t in picks:
        counts[t.row, t.col] += 1
    share = 100.0 * counts[1, 1] / len(picks) if picks else float("nan")
    return TopKLocations(counts, [t.scale for t in picks], float(share))


def zoom_groups(matrix: np.ndarray, order: list[Transform], cover: list[int]) -> dict[str, float]:
    """Upper bound of each zoom group within the model's own greedy cover, and the share of all images
    that one group solves and neither other does ("exclusively solves"), in percent.

    Each classifier uses its own cover; the authors' ``disentangling.ipynb`` reused the last classifier's.
    """
    n_images = matrix.shape[1]
    solved = {}
    for name, member in ZOOM_GROUPS.items():
        rows = [t for t in cover if member(order[t].scale)]
        solved[name] = matrix[rows].any(axis=0) if rows else np.zeros(n_images, bool)
    out: dict[str, float] = {}
    for name, hits in solved.items():
        others = np.logical_or.reduce([h for other, h in solved.items() if other != name])
        out[f"ub_{name}"] = 100 * float(hits.mean()) if n_images else 0.0
        out[f"excl_{name}"] = 100 * float((hits & ~others).mean()) if n_images else 0.0
    return out
