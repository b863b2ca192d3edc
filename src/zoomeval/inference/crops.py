"""The crops of a dataset's images, batched across images (see :func:`zoomeval.core.zoom.all_crops`).

With ``resize_backend: device`` the workers only decode: each image goes to the inference device as one uint8
tensor, and :func:`device_crops` resizes it to every scale and cuts its crops there."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import Dataset

from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import Record
from zoomeval.core.pil_resample import PRECISION_BITS
from zoomeval.core.zoom import all_crops
from zoomeval.inference.crop_plan import TAPS, CropPlan, PassTaps, crop_plan
from zoomeval.masks.boxes import apply_variant, decode_mask

log = logging.getLogger(__name__)


class ZoomCrops(Dataset[tuple[int, "torch.Tensor | DeviceImage"]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8, followed by the
    aggregation methods' extra views with ``extra_views``; with the ``device`` backend, as the decoded
    ``H x W x 3`` uint8 image and its size's plan (a :class:`DeviceImage`), for :func:`plan_crops`."""

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

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | DeviceImage]:
        image = self.decoded(i)
        if self.backend == DEVICE_BACKEND:  # the plan is built here, beside the decode, not in the predict loop
            return i, self.device_image(image)
        return i, self.host_crops(image, self.backend)

    def decoded(self, i: int) -> Image.Image:
        """Image ``i`` as decoded, under its variant's mask."""
        record = self.records[i]
        image = load_rgb(record)
        mask = decode_mask(self.masks[record.image_id]) if self.variant != "original" and self.masks else None
        return apply_variant(image, mask, self.variant)

    def device_image(self, image: Image.Image) -> DeviceImage:
        """A decoded image and its size's plan, for the device path."""
        pixels = np.array(image.convert("RGB"))
        plan = crop_plan(pixels.shape[1], pixels.shape[0], tuple(self.scales), self.size, self.extra_views)
        return DeviceImage(torch.from_numpy(pixels), plan)

    def host_crops(self, image: Image.Image, backend: str) -> torch.Tensor:
        """A decoded image's crops, cut on the host by ``backend`` (``pil`` or ``torch``)."""
        return torch.from_numpy(all_crops(image, self.scales, self.size, backend, self.extra_views))

    def rest(self, start: int, backend: str) -> ZoomCrops:
        """These crops of the records from ``start`` on, with ``backend``."""
        return ZoomCrops(self.records[start:], self.scales, self.variant, self.masks, self.size, backend,
                         self.extra_views)  # fmt: skip


#: The ``resize_backend`` that resizes and cuts on the inference device.
DEVICE_BACKEND = "device"
#: The ``resize_backend`` that, on a CUDA device, times the device path and PIL on a job's first images and runs the
#: rest on the faster (:mod:`zoomeval.inference.auto_backend`), and is ``pil`` on a CPU (where PIL's own C loops
#: are about 10 times faster than the device path's tensor operations, so measuring would only cost time).
AUTO_BACKEND = "auto"
#: The device types on which ``auto`` measures.
MEASURED_ON = frozenset({"cuda"})

#: Pillow's rounding offset, the initial value of each fixed-point sum (``1 << (PRECISION_BITS - 1)``).
HALF = 1 << (PRECISION_BITS - 1)


def resolve_backend(backend: str, device: torch.device) -> str:
    """The resize backend a job on ``device`` uses for the setting ``backend``: ``auto`` stays ``auto`` where the job
    chooses by measurement (:data:`MEASURED_ON`), and is ``pil`` elsewhere."""
    if backend != AUTO_BACKEND or device.type in MEASURED_ON:
        return backend
    return "pil"


class DeviceImage(NamedTuple):
    """A decoded ``H x W x 3`` uint8 image and its size's :class:`CropPlan`, as a worker hands them over (a
    DataLoader pins both)."""

    pixels: torch.Tensor
    plan: CropPlan


#: The most bytes of int32 products one pass materialises at once: a larger pass (an image of thousands of pixels;
#: 2000 x 1500 at 36 scales needs 5 GB) runs in slices along the axis it leaves as it is, so that a GPU with little
#: memory resizes it too, at a few more device operations.
MAX_PRODUCT_BYTES = 1 << 30


def resample_pass(x: torch.Tensor, dim: int, taps: PassTaps, outputs: int) -> torch.Tensor:
    """:func:`_resample` of ``x`` (3-D), in slices along its other spatial axis where the products would exceed
    :data:`MAX_PRODUCT_BYTES`."""
    other = 1 - dim
    pieces = -(-taps.src.numel() * 4 * (x.numel() // x.shape[dim]) // MAX_PRODUCT_BYTES)
    if pieces <= 1:
        return _resample(x, dim, taps, outputs)
    step = -(-x.shape[other] // pieces)
    return torch.cat([_resample(part, dim, taps, outputs) for part in x.split(step, other)], other)


def _resample(x: torch.Tensor, dim: int, taps: PassTaps, outputs: int) -> torch.Tensor:
    """One pass of Pillow's resize along ``dim`` of the uint8 ``x``, for every output some view uses: per output,
    ``clip8((2**21 + sum(in * kk)) >> 22)`` in int32 as Pillow computes it (integer sums are exact in any order),
    over the chunks of taps ``src``/``kk`` (``(chunks, TAPS)``) summed into output ``dst``; outputs no chunk reaches
    come out 0 (black). Each step materialises its result (the int32 products above all): :func:`pass_for` picks
    the fused kernel instead where it can."""
    src, kk, dst, _ = taps
    chunks = src.shape[0]
    tail = (1,) * (x.dim() - dim - 1)
    windows = x.index_select(dim, src.view(-1)).view(*x.shape[:dim], chunks, TAPS, *x.shape[dim + 1 :])
    partial = (windows * kk.view(chunks, TAPS, *tail)).sum(dim + 1, dtype=torch.int32)
    sums = torch.full((*x.shape[:dim], outputs, *x.shape[dim + 1 :]), HALF, dtype=torch.int32, device=x.device)
    sums.index_add_(dim, dst, partial)
    return sums.bitwise_right_shift_(PRECISION_BITS).clamp_(0, 255).to(torch.uint8)


Resample = Callable[[torch.Tensor, int, PassTaps, int], torch.Tensor]


def pass_for(device: torch.device) -> Resample:
    """The passes the device path runs on ``device``: one fused Triton kernel per pass on a CUDA device
    (:mod:`zoomeval.inference.fused_pass`), else :func:`resample_pass` (plain torch operations; on a CPU, or where
    Triton is missing, as with some Windows builds of torch). Both are Pillow's integers bit for bit."""
    if device.type != "cuda":
        return resample_pass
    try:
        from zoomeval.inference.fused_pass import fused_pass
    except ImportError as exc:
        log.warning("device crops: Triton is not available (%s); plain torch passes, about 25 times the memory "
                    "traffic", exc)  # fmt: skip
        return resample_pass
    return fused_pass


def plan_crops(pixels: torch.Tensor, plan: CropPlan, resample: Resample = resample_pass) -> torch.Tensor:
    """:func:`zoomeval.core.zoom.all_crops` of a decoded ``H x W x 3`` uint8 image with its size's ``plan`` (both on
    the same device), bit for bit, in integers only.

    Per pass order, the first pass resizes the image along one axis to every scale's used rows or columns at once,
    the second each scale's result along the other (see :mod:`zoomeval.inference.crop_plan`); the views are then
    one gather from the stack of resized scales. An image costs the same few device operations whatever its size
    and the number of scales and views (``tests/test_device_path.py`` counts them). ``resample`` computes each pass
    (:func:`pass_for` gives the device's)."""
    height = pixels.shape[0]
    passes, (scale, row, col) = plan.tensors()
    stack = []
    for group, (first, second) in zip(plan.groups, passes, strict=True):
        n, rows, cols = group.n, group.rows, group.cols
        if group.height_first:  # rows j * n + g, i.e. (rows, n * W, 3): the second pass gathers along the width
            planes = resample(pixels, 0, first, group.first.outputs).view(rows, -1, 3)
            planes = resample(planes, 1, second, group.second.outputs).view(rows, n, cols, 3)
            stack.append(planes.permute(1, 0, 2, 3).contiguous())
        else:  # (H, n * cols, 3), permuted to (n * H, cols, 3) for the second pass along the height
            planes = resample(pixels, 1, first, group.first.outputs).view(height, n, cols, 3)
            planes = planes.permute(1, 0, 2, 3).reshape(n * height, cols, 3)
            stack.append(resample(planes, 0, second, group.second.outputs).view(n, rows, cols, 3))
    resized = torch.cat(stack) if len(stack) > 1 else stack[0]  # (scales, rows, cols, 3)
    return resized[scale[:, None, None], row[:, :, None], col[:, None, :]]  # (views, size, size, 3)


def device_crops(pixels: torch.Tensor, scales: list[int], size: int = 224, extra_views: bool = False) -> torch.Tensor:
    """:func:`plan_crops` with the image size's plan built here (cached) and copied to the image's device."""
    height, width = pixels.shape[:2]
    plan = crop_plan(width, height, tuple(scales), size, extra_views)
    return plan_crops(pixels, plan.to(pixels.device, non_blocking=True), pass_for(pixels.device))


class DeviceOps(TorchDispatchMode):
    """While active, lists the operations that do work on a device (not the views of a tensor, nor allocations),
    the dtypes of the tensors they create and the bytes they move: what ``tests/test_device_path.py`` bounds and
    the benchmarks report for :func:`plan_crops`. A gather reads what it writes (plus its indices), any other
    operation its whole inputs. A kernel torch does not dispatch (Triton's) is added with :meth:`kernel`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.dtypes: set[torch.dtype] = set()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if not func.is_view and func.__name__.split(".")[0] not in _NO_WORK:
            self.ops.append(str(func))
            written = _tensors(out)
            self.dtypes.update(t.dtype for t in written)
            gather = func.__name__.startswith(("index.", "index_select", "gather"))
            read = _tensors((args[1:], kwargs)) + written if gather else _tensors((args, kwargs))
            self.bytes += sum(t.numel() * t.element_size() for t in (*written, *read))
        return out

    def kernel(self, name: str, read: list[torch.Tensor], written: torch.Tensor) -> None:
        """Count a kernel launched outside torch's dispatch that reads ``read`` and writes ``written``."""
        self.ops.append(name)
        self.dtypes.add(written.dtype)
        self.bytes += sum(t.numel() * t.element_size() for t in (*read, written))


#: Operations that allocate or relabel memory without a kernel.
_NO_WORK = frozenset({"_unsafe_view", "empty", "empty_strided", "new_empty"})


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def on_device(loader: Iterator[tuple[int, DeviceImage]], device: torch.device) -> Iterator[tuple[int, torch.Tensor]]:
    """The ``device`` backend's step between the loader and :func:`batches`: copy each decoded image and its plan
    to ``device`` (asynchronously from pinned memory) and cut its crops there."""
    resample = pass_for(device)
    log.info("device crops on %s: %s", device, "one fused Triton kernel per pass" if resample is not resample_pass
             else "plain torch passes")  # fmt: skip
    for i, item in loader:
        pixels, plan = item.pixels.to(device, non_blocking=True), item.plan.to(device, non_blocking=True)
        yield i, plan_crops(pixels, plan, resample)


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
