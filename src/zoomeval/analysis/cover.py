"""Greedy minimum set cover over transforms, as the authors computed it.

Element = an image that at least one transform classifies correctly; set = the images one transform
classifies correctly. Each step picks the transform that covers the most images not yet covered; ties
go to the transform that comes first in the authors' DataFrame order (:func:`zoomeval.core.zoom.transforms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Pick:
    """One greedy step: transform index ``index`` newly covers ``gain`` images."""

    index: int
    gain: int


def greedy_cover(correct: np.ndarray) -> list[Pick]:
    """Greedy cover of a ``(n_transforms, n_images)`` boolean matrix; returns the ordered picks.

    Rows are packed into bits so that one step costs one AND and one popcount per transform.
    """
    correct = np.asarray(correct, dtype=bool)
    packed = np.packbits(correct, axis=1)
    uncovered = np.bitwise_or.reduce(packed, axis=0)
    picks: list[Pick] = []
    while uncovered.any():
        gains = np.bitwise_count(packed & uncovered).sum(axis=1, dtype=np.int64)
        best = int(np.argmax(gains))  # argmax returns the first maximum: the authors' tie rule
        picks.append(Pick(best, int(gains[best])))
        uncovered &= ~packed[best]
    return picks
