"""The crops of a dataset's images, batched across images (see :func:`zoomeval.core.zoom.all_crops`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import all_crops
from zoomeval.masks.boxes import apply_variant, decode_mask


class ZoomCrops(Dataset[tuple[int, torch.Tensor]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8, followed by the
    aggregation methods' extra views with ``extra_views``."""

    def __init__(
        self,
        records: Sequence[Record],
        scales: list[int],
        variant: str = "original",
        masks: dict[str, bytes] | None = None,
        size: int = 224,
        backend: str = "pil",
        extra_views: bool = False,
    ) -> None:
        self.records, self.scales, self.variant, self.masks = records, scales, variant, masks
        self.size, self.backend, self.extra_views = size, backend, extra_views

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        record = self.records[i]
        image = load_rgb(record)
        mask = decode_mask(self.masks[record.image_id]) if self.variant != "original" and self.masks else None
        image = apply_variant(image, mask, self.variant)
        return i, torch.from_numpy(all_crops(image, self.scales, self.size, self.backend, self.extra_views))


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
