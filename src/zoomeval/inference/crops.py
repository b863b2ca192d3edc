"""The crops of a dataset's images, batched across images (see :func:`zoomeval.core.zoom.all_crops`).

With ``resize_backend: device`` the workers only decode: each image goes to the inference device as one uint8
tensor, and :func:`device_crops` resizes it to every scale and cuts its crops there."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import all_crops, cut_all, n_views, resized_size
from zoomeval.masks.boxes import apply_variant, decode_mask


class ZoomCrops(Dataset[tuple[int, torch.Tensor]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8, followed by the
    aggregation methods' extra views with ``extra_views``; with the ``device`` backend, as the decoded
    ``H x W x 3`` uint8 image, for :func:`device_crops`."""

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
        if self.backend == DEVICE_BACKEND:
            return i, torch.from_numpy(np.array(image.convert("RGB")))
        return i, torch.from_numpy(all_crops(image, self.scales, self.size, self.backend, self.extra_views))


#: The ``resize_backend`` that resizes and cuts on the inference device.
DEVICE_BACKEND = "device"


def device_crops(pixels: torch.Tensor, scales: list[int], size: int = 224, extra_views: bool = False) -> torch.Tensor:
    """:func:`zoomeval.core.zoom.all_crops` of a decoded ``H x W x 3`` uint8 image, on the image's device.

    Each resize is torch's antialiased bicubic in float32 (CUDA has no uint8 kernel) done as PIL does it: the
    width first, rounded and clamped to uint8, then the height. Without that intermediate rounding the
    crops would drift up to 9 grey levels from PIL at sharp edges (bicubic overshoot); with it, see
    tests/test_device_path.py."""
    height, width = pixels.shape[:2]
    planar = pixels.permute(2, 0, 1)[None].float()

    def resized(scale: int) -> torch.Tensor:
        new_w, new_h = resized_size(width, height, scale)
        if (new_w, new_h) == (width, height):
            return pixels
        out = _resample(_resample(planar, height, new_w), new_h, new_w)
        return out[0].to(torch.uint8).permute(1, 2, 0)

    out = torch.zeros((n_views(scales, extra_views), size, size, 3), dtype=torch.uint8, device=pixels.device)
    return cut_all(out, map(resized, scales), scales)


def _resample(planar: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """One pass of antialiased bicubic (an unchanged side is left as it is), rounded to uint8 levels."""
    if planar.shape[2:] == (height, width):
        return planar
    out = torch.nn.functional.interpolate(planar, size=(height, width), mode="bicubic", antialias=True)
    return out.round_().clamp_(0, 255)


def on_device(
    loader: Iterator[tuple[int, torch.Tensor]], device: torch.device, scales: list[int], size: int, extra_views: bool
) -> Iterator[tuple[int, torch.Tensor]]:
    """The ``device`` backend's step between the loader and :func:`batches`: copy each decoded image to
    ``device`` (asynchronously from pinned memory) and cut its crops there."""
    for i, pixels in loader:
        yield i, device_crops(pixels.to(device, non_blocking=True), scales, size, extra_views)


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
