"""One pass of Pillow's resize as one Triton kernel: per output pixel, gather its window's taps, multiply by the
int32 coefficients, sum, shift and clip, in registers, as Pillow does (``ss += in * k``, then
``clip8(ss >> PRECISION_BITS)``). Only the uint8 result is written, so a pass moves its input, its taps and its
result once, where the plain passes (:func:`zoomeval.inference.device_resize.resample_pass`) materialise int32
products and sums: 0.26 GB per 500 x 375 image at the 36 scales instead of 6.5 GB (``bench/crops_cost.py``).

The device path runs it on a CUDA or ROCm device where Triton is installed
(:func:`zoomeval.inference.device_resize.pass_for`).
Integer sums are exact in any order, so it gives Pillow's result bit for bit on any GPU, with no floating point.
``tests/test_fused_pass.py`` compiles it for NVIDIA and AMD GPUs and runs it in Triton's interpreter
(``TRITON_INTERPRET=1``, numpy on CPU tensors) against PIL and a brute-force oracle.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
import triton
import triton.language as tl

from zoomeval.core.pil_resample import PRECISION_BITS
from zoomeval.inference.crop_plan import TAPS, PassTaps

#: Elements of a pass's result per program; the interpreter's vectors are cheap, its programs are not.
BLOCK, INTERPRETED_BLOCK = 1024, 1 << 16


def _resample_kernel(
    x, src, kk, offsets, out, length, outputs, inner, total, TAPS: tl.constexpr, BITS: tl.constexpr, BLOCK: tl.constexpr
):  # noqa: N803
    """``x`` is ``(outer, length, inner)`` and ``out`` ``(outer, outputs, inner)``, both uint8 and contiguous, and
    ``total`` the size of ``out``: a program computes ``BLOCK`` consecutive elements of ``out``, looping over the
    most chunks any of their outputs has (outputs with fewer are masked)."""
    element = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = element < total
    position = element % inner
    output = (element // inner) % outputs
    row = element // (inner * outputs)
    first = tl.load(offsets + output, mask=inside, other=0)
    count = tl.load(offsets + output + 1, mask=inside, other=0) - first
    row_in = x + row * length * inner + position
    acc = tl.full([BLOCK], 1 << (BITS - 1), tl.int32)
    for c in range(0, tl.max(count, 0)):
        live = inside & (c < count)
        chunk = (first + c) * TAPS
        for t in tl.static_range(TAPS):
            source = tl.load(src + chunk + t, mask=live, other=0)
            weight = tl.load(kk + chunk + t, mask=live, other=0)
            pixel = tl.load(row_in + source * inner, mask=live, other=0)
            acc += pixel.to(tl.int32) * weight
    value = tl.minimum(tl.maximum(acc >> BITS, 0), 255).to(tl.uint8)
    tl.store(out + element, value, mask=inside)


@functools.cache
def _kernel(interpreted: bool) -> triton.JITFunction:
    """The kernel, compiled for the GPU or, with ``TRITON_INTERPRET=1``, run by Triton's interpreter."""
    del interpreted  # the cache key: triton.jit reads TRITON_INTERPRET itself
    # one compilation for every image size: the sizes are not specialised on (as multiples of 16, or 1)
    return triton.jit(_resample_kernel, do_not_specialize=["length", "outputs", "inner", "total"])


def fused_pass(x: torch.Tensor, dim: int, taps: PassTaps, outputs: int) -> torch.Tensor:
    """The pass of :func:`zoomeval.inference.device_resize.resample_pass` (same arguments, same result) in one
    kernel."""
    length, inner = x.shape[dim], math.prod(x.shape[dim + 1 :])
    out = torch.empty((*x.shape[:dim], outputs, *x.shape[dim + 1 :]), dtype=torch.uint8, device=x.device)
    interpreted = triton.knobs.runtime.interpret
    block = INTERPRETED_BLOCK if interpreted else BLOCK
    grid = (triton.cdiv(out.numel(), block),)
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():  # Triton launches on the current one
        _kernel(interpreted)[grid](
            x.contiguous(),
            taps.src,
            taps.kk,
            taps.offsets,
            out,
            length,
            outputs,
            inner,
            out.numel(),
            TAPS=TAPS,
            BITS=PRECISION_BITS,
            BLOCK=block,
        )
    return out
