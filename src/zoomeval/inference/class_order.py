"""A model's logits in ImageNet-1k's class order, whatever order its own output has.

Every dataset is scored over ImageNet-1k's 1000 classes (or a subset of them) by their index, timm's and
torchvision's order (:mod:`zoomeval.core.classes`). A model defined outside those libraries states the WordNet id
of each of its logits; :func:`imagenet_indices` turns that list into indices, refusing anything that does not name
distinct ImageNet-1k classes, and :class:`ImageNetOrder` places each logit at its class's index. A class the model
has no logit for gets the lowest finite value, so it is never predicted; a dataset scored over such a class is
refused (:func:`uncovered`), since the model could not be scored fairly there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from zoomeval.core.classes import NUM_CLASSES, wnid_index, wnids_of


def imagenet_indices(classes: Any, source: str) -> tuple[int, ...]:
    """The ImageNet-1k index of each WordNet id in ``classes`` (``source`` names where they come from)."""
    if isinstance(classes, str | bytes) or not isinstance(classes, Sequence) or not classes:
        raise ValueError(
            f"{source}: the class order must be a non-empty list of WordNet ids (n01440764, ...), one "
            f"per logit; got {type(classes).__name__}"
        )
    if not all(isinstance(wnid, str) for wnid in classes):
        wrong = next(c for c in classes if not isinstance(c, str))
        raise ValueError(
            f"{source}: the class order holds {wrong!r}, not a WordNet id; class indices are refused "
            "(their order is what must be stated)"
        )
    indices = tuple(wnid_index(wnid, source) for wnid in classes)
    if len(set(indices)) != len(indices):
        twice = sorted({c for c in classes if list(classes).count(c) > 1})
        raise ValueError(
            f"{source}: the class order names {twice[:5]} more than once; each logit must be its own class"
        )
    return indices


def uncovered(indices: Sequence[int] | None, scored: Sequence[int] | None) -> list[str]:
    """The WordNet ids of the classes a dataset is scored over (``scored``; None: all 1000) that a model's logits
    (``indices``; None: all 1000) do not cover."""
    if indices is None:
        return []
    return wnids_of(sorted(set(range(NUM_CLASSES) if scored is None else scored) - set(indices)))


class ImageNetOrder(torch.nn.Module):
    """``module``'s logits, one per class of ``indices``, placed at those ImageNet-1k indices of a 1000-wide output.

    ``transform`` is the model's evaluation transform (:mod:`zoomeval.inference.eval_transform`), kept with it."""

    def __init__(self, module: torch.nn.Module, indices: Sequence[int], transform: Any, name: str) -> None:
        super().__init__()
        self.module, self.transform, self.name = module, transform, name
        self.register_buffer("index", torch.tensor(list(indices)), persistent=False)
        self.identity = tuple(indices) == tuple(range(NUM_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.module(x)
        if logits.ndim != 2 or logits.shape[1] != len(self.index):
            raise ValueError(
                f"model {self.name!r} gave logits of shape {tuple(logits.shape)}, but its class order "
                f"names {len(self.index)} classes: one logit per class, per image"
            )
        if self.identity:
            return logits
        placed = logits.new_full((logits.shape[0], NUM_CLASSES), torch.finfo(logits.dtype).min)
        return placed.index_copy(1, self.index, logits)
