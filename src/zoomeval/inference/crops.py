"""The crops of a dataset's images, batched across images (see :func:`zoomeval.core.zoom.all_crops`).

With ``resize_backend: device`` the workers only decode: each image goes to the inference device as one uint8
tensor, and :func:`device_crops` resizes it to every scale and cuts its crops there."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.pil_resample import PRECISION_BITS, taps, vertical_first
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
#: most ImageNet images have one of a few sizes, and a new size costs the host some 30 ms).
PLAN_CACHE = 16


#: Pillow's coefficients are integers; scaled by this power of two they stay exact in float64, and so do the sums, so
#: a product with them is a pass's fixed-point sum already shifted by ``PRECISION_BITS``.
SCALE = 2.0**-PRECISION_BITS


def resolve_backend(backend: str, device: torch.device) -> str:
    """The resize backend a job on ``device`` uses for the setting ``backend``."""
    if backend != AUTO_BACKEND:
        return backend
    return DEVICE_BACKEND if device.type == "cuda" else "pil"


class CropPlan:
    """How :func:`device_crops` cuts every view of one image size, on ``device``.

    Per scale, Pillow's coefficient matrices (:func:`zoomeval.core.pil_resample.taps`) for only the resized rows and
    columns that some view uses, padded with zero coefficients to the same ``rows x cols`` for all scales (so the
    last row and column of every scale are padding: they come out black and serve as the crops' black border). The
    scales are in two groups, those Pillow resizes width first and those it resizes height first
    (:func:`zoomeval.core.pil_resample.vertical_first`), each ``(height_first, ay, bx)`` in the layout
    :func:`device_crops` multiplies it in; ``index`` cuts every view from the stack of resized scales. The host
    computes only the nonzero coefficients and the indices; the matrices are filled in on the device, and nothing
    waits for it."""

    def __init__(self, width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool,
                 device: torch.device) -> None:  # fmt: skip
        n, span = len(scales), np.arange(size)
        sizes = [resized_size(width, height, s) for s in scales]
        views = sorted((slot, k, left, top, mirrored) for k, (s, (w, h)) in enumerate(zip(scales, sizes, strict=True))
                       for slot, left, top, mirrored in scale_views(k, n, s, w, h, size, extra_views))  # fmt: skip
        _, scale_of, lefts, tops, mirrored = (np.array(column) for column in zip(*views, strict=True))
        widths, heights = (np.array(side) for side in zip(*sizes, strict=True))
        used_rows = [_used(tops[scale_of == k], span, h) for k, h in enumerate(heights)]
        used_cols = [_used(lefts[scale_of == k], span, w) for k, w in enumerate(widths)]
        rows, cols = self.rows, self.cols = max(map(len, used_rows)) + 1, max(map(len, used_cols)) + 1
        first = [vertical_first(width, height, w, h) for w, h in sizes]
        self.groups: list[tuple[bool, torch.Tensor, torch.Tensor]] = []
        order: list[int] = []
        for height_first in (False, True):
            group = [k for k in range(n) if first[k] == height_first]
            if not group:
                continue
            ay, bx = [], []  # (flat position, coefficient) in each matrix
            for g, k in enumerate(group):
                j, y, kk = taps(height, sizes[k][1], used_rows[k])
                ay.append(((g * rows + j) * height + y, kk * SCALE))  # (n, rows, H), or (n * rows, H): the same
                j, x, kk = taps(width, sizes[k][0], used_cols[k])
                at = (g * width + x) * cols + j if height_first else x * len(group) * cols + g * cols + j
                bx.append((at, kk * SCALE))
            ay_shape = (len(group) * rows, height) if height_first else (len(group), rows, height)
            bx_shape = (len(group), width, cols) if height_first else (width, len(group) * cols)
            self.groups.append((height_first, _matrix(ay_shape, ay, device), _matrix(bx_shape, bx, device)))
            order += group
        position = np.argsort(order)  # where scale k is in the stack of resized scales
        col_offsets = np.where(mirrored[:, None], span[::-1], span)
        self.index = (
            _upload(position[scale_of][:, None, None], device),
            _upload(_index(used_rows, scale_of, tops[:, None] + span, heights, rows - 1)[:, :, None], device),
            _upload(_index(used_cols, scale_of, lefts[:, None] + col_offsets, widths, cols - 1)[:, None, :], device),
        )


def _used(starts: np.ndarray, span: np.ndarray, limit: int) -> np.ndarray:
    """The sorted pixels within ``0 .. limit - 1`` of the windows ``start + span``."""
    pixels = np.unique(starts[:, None] + span)
    return pixels[(pixels >= 0) & (pixels < limit)]


def _index(used: list[np.ndarray], scale_of: np.ndarray, wanted: np.ndarray, limits: np.ndarray, pad: int
           ) -> np.ndarray:  # fmt: skip
    """Where each view's ``wanted`` pixels (a row per view) are among the ``used`` ones of the view's scale; ``pad``
    (a black row or column) outside the resized image. One search over all scales, each shifted apart."""
    shift = int(limits.max()) + 1
    everything = np.concatenate([k * shift + pixels for k, pixels in enumerate(used)])
    starts = np.cumsum([0] + [len(pixels) for pixels in used])[:-1]
    found = np.searchsorted(everything, scale_of[:, None] * shift + wanted) - starts[scale_of][:, None]
    return np.where((wanted >= 0) & (wanted < limits[scale_of][:, None]), found, pad)


def _upload(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``array`` on ``device``; to a GPU from pinned memory, without waiting for it."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def _matrix(shape: tuple[int, ...], entries: list[tuple[np.ndarray, np.ndarray]], device: torch.device
            ) -> torch.Tensor:  # fmt: skip
    """The float64 matrix of ``shape`` on ``device`` that is zero but at the ``(flat position, value)`` entries."""
    at, values = (np.concatenate(column) for column in zip(*entries, strict=True))
    matrix = torch.zeros(math.prod(shape), dtype=torch.float64, device=device)
    return matrix.scatter_(0, _upload(at, device), _upload(values, device)).view(shape)


@functools.lru_cache(maxsize=PLAN_CACHE)
def crop_plan(width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool,
              device: torch.device) -> CropPlan:  # fmt: skip
    """The :class:`CropPlan` of one image size, built once and kept for the next image of that size."""
    return CropPlan(width, height, scales, size, extra_views, device)


def _round(sums: torch.Tensor) -> torch.Tensor:
    """Pillow's ``clip8`` of a pass's fixed-point sums times :data:`SCALE`, in place: ``(sum + 2**21) >> 22``,
    clamped to 0..255."""
    return sums.add_(0.5).floor_().clamp_(0, 255)


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
