"""The device path's resize: a decoded uint8 image and its size's plan (built in the workers,
:mod:`zoomeval.inference.crop_plan`) to all its crops, on the inference device, bit for bit as Pillow, in integers
only. Each pass is one fused Triton kernel on a CUDA device (:mod:`zoomeval.inference.fused_pass`), else plain torch
operations (:func:`resample_pass`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import torch

from zoomeval.core.pil_resample import PRECISION_BITS
from zoomeval.inference.crop_dataset import DeviceImage
from zoomeval.inference.crop_plan import TAPS, CropPlan, PassTaps, crop_plan

log = logging.getLogger(__name__)

#: Pillow's rounding offset, the initial value of each fixed-point sum (``1 << (PRECISION_BITS - 1)``).
HALF = 1 << (PRECISION_BITS - 1)


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
        log.warning(
            "device crops: Triton is not available (%s); plain torch passes, about 25 times the memory traffic", exc
        )
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


def on_device(loader: Iterator[tuple[int, DeviceImage]], device: torch.device) -> Iterator[tuple[int, torch.Tensor]]:
    """The ``device`` backend's step between the loader and :func:`batches`: copy each decoded image and its plan
    to ``device`` (asynchronously from pinned memory) and cut its crops there."""
    resample = pass_for(device)
    log.info(
        "device crops on %s: %s",
        device,
        "one fused Triton kernel per pass" if resample is not resample_pass else "plain torch passes",
    )
    for i, item in loader:
        pixels, plan = item.pixels.to(device, non_blocking=True), item.plan.to(device, non_blocking=True)
        yield i, plan_crops(pixels, plan, resample)
