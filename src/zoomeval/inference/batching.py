"""Per-image crop stacks regrouped into the model's batches, across image boundaries."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch


def batches(
    loader: Iterator[tuple[int, torch.Tensor]], batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, torch.Tensor]]:
    """Regroup per-image crop stacks into batches of ``batch_size`` crops across image boundaries.

    Yields ``(image_index, transform_index, crops)`` per batch.
    """
    pending: list[tuple[int, int, torch.Tensor]] = []  # (image, first transform not yet yielded, crops)
    held = 0
    for i, crops in loader:
        pending.append((i, 0, crops))
        held += len(crops)
        while held >= batch_size:
            yield _take(pending, batch_size)
            held -= batch_size
    if held:
        yield _take(pending, held)


def _take(pending: list[tuple[int, int, torch.Tensor]], n: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    images, tids, parts = [], [], []
    while n:
        i, start, crops = pending[0]
        k = min(n, len(crops) - start)
        images.append(np.full(k, i, dtype=np.int64))
        tids.append(np.arange(start, start + k))
        parts.append(crops[start : start + k])
        n -= k
        if start + k == len(crops):
            pending.pop(0)
        else:
            pending[0] = (i, start + k, crops)
    return np.concatenate(images), np.concatenate(tids), torch.cat(parts) if len(parts) > 1 else parts[0]
