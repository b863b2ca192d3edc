"""The crops of a dataset's images, batched across images (see :func:`zoomeval.core.zoom.all_crops`).

With ``resize_backend: device`` the workers only decode: each image goes to the inference device as one uint8
tensor, and :func:`device_crops` resizes it to every scale and cuts its crops there."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.pil_resample import PRECISION_BITS, coefficients, vertical_first
from zoomeval.core.zoom import all_crops, resized_size, scale_views
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
#: The ``resize_backend`` that picks the device path on a GPU and ``pil`` on a CPU, where the device path's float64
#: matrix products are about 10x slower than PIL.
AUTO_BACKEND = "auto"
#: Image sizes whose :class:`CropPlan` stays on the device (about 170 MB each for 500 x 375 at the 36 paper scales;
#: most ImageNet images have one of a few sizes).
PLAN_CACHE = 8


def resolve_backend(backend: str, device: torch.device) -> str:
    """The resize backend a job on ``device`` uses for the setting ``backend``."""
    if backend != AUTO_BACKEND:
        return backend
    return DEVICE_BACKEND if device.type == "cuda" else "pil"


class CropPlan:
    """How :func:`device_crops` cuts every view of one image size, on ``device``.

    Per scale, Pillow's coefficient matrices (:func:`zoomeval.core.pil_resample.coefficients`) for only the resized
    rows and columns that some view uses, padded with zero coefficients to the same ``rows x cols`` for all scales
    (so the last row and column of every scale are padding: they come out black and serve as the crops' black
    border). The scales are in two groups, those Pillow resizes width first and those it resizes height first
    (:func:`zoomeval.core.pil_resample.vertical_first`), each ``(height_first, ay, bx)`` in the layout
    :func:`device_crops` multiplies it in; ``index`` cuts every view from the stack of resized scales."""

    def __init__(self, width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool,
                 device: torch.device) -> None:  # fmt: skip
        n, span = len(scales), np.arange(size)
        sizes = [resized_size(width, height, s) for s in scales]
        views = sorted((slot, k, left, top, mirrored) for k, (s, (w, h)) in enumerate(zip(scales, sizes, strict=True))
                       for slot, left, top, mirrored in scale_views(k, n, s, w, h, size, extra_views))  # fmt: skip
        used_rows = [_used([top for _, j, _, top, _ in views if j == k], span, h) for k, (_, h) in enumerate(sizes)]
        used_cols = [_used([left for _, j, left, _, _ in views if j == k], span, w) for k, (w, _) in enumerate(sizes)]
        self.rows, self.cols = max(map(len, used_rows)) + 1, max(map(len, used_cols)) + 1
        first = [vertical_first(width, height, w, h) for w, h in sizes]
        self.groups: list[tuple[bool, torch.Tensor, torch.Tensor]] = []
        order: list[int] = []
        for height_first in (False, True):
            group = [k for k in range(n) if first[k] == height_first]
            if not group:
                continue
            ay, bx = np.zeros((len(group), self.rows, height)), np.zeros((len(group), width, self.cols))
            for g, k in enumerate(group):
                ay[g, : len(used_rows[k])] = coefficients(height, sizes[k][1], used_rows[k])
                bx[g, :, : len(used_cols[k])] = coefficients(width, sizes[k][0], used_cols[k]).T
            if height_first:  # ay (n * rows, H), bx (n, W, cols)
                ay = ay.reshape(-1, height)
            else:  # ay (n, rows, H), bx (W, n * cols)
                bx = bx.transpose(1, 0, 2).reshape(width, -1)
            self.groups.append((height_first, _tensor(ay, device), _tensor(bx, device)))
            order += group
        position = np.argsort(order)  # where scale k is in the stack of resized scales
        row_index = [_index(used_rows[k], top + span, sizes[k][1], self.rows - 1) for _, k, _, top, _ in views]
        col_index = [_index(used_cols[k], left + (span[::-1] if mirrored else span), sizes[k][0], self.cols - 1)
                     for _, k, left, _, mirrored in views]  # fmt: skip
        self.index = (
            _tensor(position[[k for _, k, _, _, _ in views]][:, None, None], device),
            _tensor(np.stack(row_index)[:, :, None], device),
            _tensor(np.stack(col_index)[:, None, :], device),
        )


def _used(starts: list[int], span: np.ndarray, limit: int) -> np.ndarray:
    """The sorted pixels within ``0 .. limit - 1`` of the windows ``start + span``."""
    pixels = np.unique(np.concatenate([start + span for start in starts]))
    return pixels[(pixels >= 0) & (pixels < limit)]


def _index(used: np.ndarray, wanted: np.ndarray, limit: int, pad: int) -> np.ndarray:
    """Where each ``wanted`` pixel is among the ``used`` ones; ``pad`` (a black row or column) outside the image."""
    inside = (wanted >= 0) & (wanted < limit)
    return np.where(inside, np.searchsorted(used, wanted.clip(0, limit - 1)), pad)


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


@functools.lru_cache(maxsize=PLAN_CACHE)
def crop_plan(width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool,
              device: torch.device) -> CropPlan:  # fmt: skip
    """The :class:`CropPlan` of one image size, built once and kept for the next image of that size."""
    return CropPlan(width, height, scales, size, extra_views, device)


def _round(sums: torch.Tensor) -> torch.Tensor:
    """Pillow's ``clip8`` of a pass's fixed-point sums, in place: ``(sum + 2**21) >> 22``, clamped to 0..255."""
    return sums.add_(1 << (PRECISION_BITS - 1)).mul_(2.0**-PRECISION_BITS).floor_().clamp_(0, 255)  # all exact


def device_crops(pixels: torch.Tensor, scales: list[int], size: int = 224, extra_views: bool = False) -> torch.Tensor:
    """:func:`zoomeval.core.zoom.all_crops` of a decoded ``H x W x 3`` uint8 image, on the image's device, bit for bit.

    Each pass of Pillow's resize is a float64 matrix product with its integer coefficients (exact, see
    :mod:`zoomeval.core.pil_resample`), rounded as Pillow rounds, for all scales of a group at once; the views are
    then one gather. So an image costs a constant number of device operations whatever the number of scales and
    views (``tests/test_device_path.py`` counts them)."""
    height, width = pixels.shape[:2]
    plan = crop_plan(width, height, tuple(scales), size, extra_views, pixels.device)
    rows, cols = plan.rows, plan.cols
    # (H, 3, W): each row of the image as three colour rows, so both passes are plain matrix products.
    x = pixels.permute(0, 2, 1).to(torch.float64, memory_format=torch.contiguous_format)
    stack = []
    for height_first, ay, bx in plan.groups:
        if height_first:
            n = len(bx)
            planes = _round(ay @ x.view(height, 3 * width)).view(n, rows * 3, width)
            stack.append(_round(planes @ bx).view(n, rows, 3, cols))
        else:
            n = len(ay)
            planes = _round(x.view(height * 3, width) @ bx).view(height, 3, n, cols)
            planes = planes.permute(2, 0, 1, 3).reshape(n, height, 3 * cols)
            stack.append(_round(ay @ planes).view(n, rows, 3, cols))
    resized = (torch.cat(stack) if len(stack) > 1 else stack[0]).to(torch.uint8)  # (scales, rows, 3, cols)
    scale, row, col = plan.index
    return resized[scale, row, :, col]  # (views, size, size, 3)


class DeviceOps(TorchDispatchMode):
    """While active, lists the operations that do work on a device (not the views of a tensor): what
    ``tests/test_device_path.py`` bounds and ``bench/gpu_check.py`` reports for :func:`device_crops`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if not func.is_view and func is not torch.ops.aten._unsafe_view.default:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


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
