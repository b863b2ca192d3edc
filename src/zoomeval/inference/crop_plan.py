"""How the device path cuts every view of one image size: Pillow's integer taps and the views' indices.

Built on the host with numpy (in the DataLoader worker that decodes the image, beside the decode) as one int32
buffer plus a few integers, so that a new image size costs the predict loop nothing and the device one copy.

Per scale, each pass of Pillow's resize (:mod:`zoomeval.core.pil_resample`) needs, for only the resized rows and
columns some view uses, the window of input pixels of each output pixel and their int32 coefficients. A window
has at most ``2 * ceil(2 * max(in / out, 1)) + 1`` taps (5 when enlarging, 151 when shrinking 375 px to 10), so
windows are cut into chunks of :data:`TAPS` taps (zero coefficients pad the last chunk), ordered by output: a pass
is then a gather of ``(chunks, TAPS)`` input rows, an int32 multiply-add over the taps, and a sum of each output's
chunks, the same few operations for every scale, window length and image size, or one kernel that walks each
output's chunks (:mod:`zoomeval.inference.fused_pass`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from zoomeval.core.pil_resample import taps, vertical_first
from zoomeval.core.zoom import resized_size, scale_views

#: Taps per chunk: an enlarging pass's whole window (Pillow's bicubic support is 2 pixels either side).
TAPS = 5
#: Image sizes whose plan a worker keeps (a few MB each); a size not kept costs only its build, in the worker.
PLAN_CACHE = 8


@dataclass(frozen=True)
class PassLayout:
    """One pass over ``n`` stacked inputs: ``chunks`` chunks of :data:`TAPS` taps summed into ``outputs`` rows."""

    chunks: int
    outputs: int


class PassTaps(NamedTuple):
    """One pass's taps on a device: chunk ``c`` adds the inputs ``src[c]`` times ``kk[c]`` (``(chunks, TAPS)``) to
    output ``dst[c]``; chunks are ordered by output, those of output ``o`` being ``offsets[o]:offsets[o + 1]``."""

    src: torch.Tensor
    kk: torch.Tensor
    dst: torch.Tensor
    offsets: torch.Tensor


@dataclass(frozen=True)
class GroupLayout:
    """The scales Pillow resizes in one pass order: ``n`` of them, each padded to ``rows x cols`` (the last row
    and column stay black: the crops' border), height first or width first."""

    height_first: bool
    n: int
    rows: int
    cols: int
    first: PassLayout
    second: PassLayout


class CropPlan:
    """Every view of one image size as integer taps and indices in one int32 ``buffer`` (see the module).

    The buffer holds, per group, each pass's ``(chunks, TAPS)`` input indices and coefficients, its ``chunks``
    output indices and its ``outputs + 1`` offsets (a :class:`PassTaps`), then the views' scale ``(views,)``, row
    ``(views, size)`` and column ``(views, size)`` in the stack of resized scales. It moves between processes and
    devices as one tensor (:meth:`to`, :meth:`pin_memory`, so that a DataLoader pins it)."""

    def __init__(self, buffer: torch.Tensor, groups: tuple[GroupLayout, ...], views: int, size: int) -> None:
        self.buffer, self.groups, self.views, self.size = buffer, groups, views, size

    @property
    def nbytes(self) -> int:
        return self.buffer.numel() * self.buffer.element_size()

    def to(self, device: torch.device, non_blocking: bool = False) -> CropPlan:
        return CropPlan(self.buffer.to(device, non_blocking=non_blocking), self.groups, self.views, self.size)

    def pin_memory(self) -> CropPlan:
        return CropPlan(self.buffer.pin_memory(), self.groups, self.views, self.size)

    def tensors(self) -> tuple[list[tuple[PassTaps, PassTaps]], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Views of the buffer: per group the first pass's :class:`PassTaps` and the second's, and the views'
        ``(scale, row, col)`` gather indices."""
        at, parts = 0, []
        shapes = [s for g in self.groups for p in (g.first, g.second) for s in _pass_shapes(p)]
        shapes += [(self.views,), (self.views, self.size), (self.views, self.size)]
        for shape in shapes:
            count = int(np.prod(shape))
            parts.append(self.buffer[at : at + count].view(shape))
            at += count
        each = [PassTaps(*parts[k : k + 4]) for k in range(0, 8 * len(self.groups), 4)]
        passes = [(each[k], each[k + 1]) for k in range(0, len(each), 2)]
        scale, row, col = parts[-3:]
        return passes, (scale, row, col)


def _pass_shapes(layout: PassLayout) -> tuple[tuple[int, ...], ...]:
    return (layout.chunks, TAPS), (layout.chunks, TAPS), (layout.chunks,), (layout.outputs + 1,)


def build_plan(width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool) -> CropPlan:
    """The :class:`CropPlan` of a ``width x height`` image (numpy on the host)."""
    n, span = len(scales), np.arange(size)
    sizes = [resized_size(width, height, s) for s in scales]
    views = sorted(
        (slot, k, left, top, mirrored)
        for k, (s, (w, h)) in enumerate(zip(scales, sizes, strict=True))
        for slot, left, top, mirrored in scale_views(k, n, s, w, h, size, extra_views)
    )
    _, scale_of, lefts, tops, mirrored = (np.array(column) for column in zip(*views, strict=True))
    widths, heights = (np.array(side) for side in zip(*sizes, strict=True))
    used_rows = [_used(tops[scale_of == k], span, h) for k, h in enumerate(heights)]
    used_cols = [_used(lefts[scale_of == k], span, w) for k, w in enumerate(widths)]
    rows, cols = max(map(len, used_rows)) + 1, max(map(len, used_cols)) + 1
    order_of = [vertical_first(width, height, w, h) for w, h in sizes]
    arrays, groups, order = [], [], []
    for height_first in (False, True):
        group = [k for k in range(n) if order_of[k] == height_first]
        if not group:
            continue
        vertical = [(height, sizes[k][1], used_rows[k], rows) for k in group]
        horizontal = [(width, sizes[k][0], used_cols[k], cols) for k in group]
        first, second = (vertical, horizontal) if height_first else (horizontal, vertical)
        # Height first, the first pass writes output j of slot g to row j * n + g, so that its result is already
        # (rows, n * width) for the second, which gathers along the width; width first, the result is permuted.
        first_arrays, first_layout = _pass(first, stacked=False, interleaved=height_first)
        second_arrays, second_layout = _pass(second, stacked=True, interleaved=False)
        arrays += first_arrays + second_arrays
        groups.append(GroupLayout(height_first, len(group), rows, cols, first_layout, second_layout))
        order += group
    position = np.argsort(order)  # where scale k is in the stack of resized scales
    col_offsets = np.where(mirrored[:, None], span[::-1], span)
    arrays += [
        position[scale_of],
        _index(used_rows, scale_of, tops[:, None] + span, heights, rows - 1),
        _index(used_cols, scale_of, lefts[:, None] + col_offsets, widths, cols - 1),
    ]
    buffer = torch.from_numpy(np.concatenate([np.asarray(a, dtype=np.int32).ravel() for a in arrays]))
    return CropPlan(buffer, tuple(groups), len(views), size)


@functools.lru_cache(maxsize=PLAN_CACHE)
def crop_plan(width: int, height: int, scales: tuple[int, ...], size: int, extra_views: bool) -> CropPlan:
    """:func:`build_plan`, kept for the next image of the same size."""
    return build_plan(width, height, scales, size, extra_views)


def _pass(
    axes: list[tuple[int, int, np.ndarray, int]], stacked: bool, interleaved: bool
) -> tuple[list[np.ndarray], PassLayout]:
    """One pass's ``(src, kk, dst, offsets)`` (see :class:`PassTaps`) over the scales of a group, each ``(input
    length, output length, output pixels computed, padded output length)``: output ``j`` of slot ``g`` is row
    ``g * padded + j`` of the result (``j * slots + g`` if ``interleaved``), and with ``stacked`` its inputs are rows
    ``g * input length + x`` (slot ``g``'s own first-pass result)."""
    src, kk, dst = [], [], []
    for g, (length, out_length, outputs, padded) in enumerate(axes):
        j, x, k = taps(length, out_length, outputs)
        chunk_src, chunk_kk, chunk_of = _chunks(j, x + (g * length if stacked else 0), k)
        src.append(chunk_src)
        kk.append(chunk_kk)
        dst.append(chunk_of * len(axes) + g if interleaved else g * padded + chunk_of)
    outputs, dst_all = len(axes) * axes[0][3], np.concatenate(dst)
    order = np.argsort(dst_all, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(dst_all, minlength=outputs))])
    src_all, kk_all = np.concatenate(src)[order], np.concatenate(kk)[order]
    return [src_all, kk_all, dst_all[order], offsets], PassLayout(len(dst_all), outputs)


def _chunks(j: np.ndarray, x: np.ndarray, kk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The taps ``(j, x, kk)`` (sorted by output ``j``, as :func:`taps` gives them) cut into chunks of
    :data:`TAPS`: ``(chunks, TAPS)`` inputs and coefficients (padding: input 0, coefficient 0), and each chunk's
    output."""
    counts = np.bincount(j)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.arange(len(j)) - first[j]
    per_output = -(-counts // TAPS)
    chunk_start = np.concatenate([[0], np.cumsum(per_output)[:-1]])
    chunk = chunk_start[j] + position // TAPS
    src = np.zeros((per_output.sum(), TAPS), dtype=np.int64)
    coefficients = np.zeros((per_output.sum(), TAPS), dtype=np.int64)
    src[chunk, position % TAPS] = x
    coefficients[chunk, position % TAPS] = kk
    return src, coefficients, np.repeat(np.arange(len(counts)), per_output)


def _used(starts: np.ndarray, span: np.ndarray, limit: int) -> np.ndarray:
    """The sorted pixels within ``0 .. limit - 1`` of the windows ``start + span``."""
    pixels = np.unique(starts[:, None] + span)
    return pixels[(pixels >= 0) & (pixels < limit)]


def _index(
    used: list[np.ndarray], scale_of: np.ndarray, wanted: np.ndarray, limits: np.ndarray, pad: int
) -> np.ndarray:
    """Where each view's ``wanted`` pixels (a row per view) are among the ``used`` ones of the view's scale; ``pad``
    (a black row or column) outside the resized image. One search over all scales, each shifted apart."""
    shift = int(limits.max()) + 1
    everything = np.concatenate([k * shift + pixels for k, pixels in enumerate(used)])
    starts = np.cumsum([0] + [len(pixels) for pixels in used])[:-1]
    found = np.searchsorted(everything, scale_of[:, None] * shift + wanted) - starts[scale_of][:, None]
    return np.where((wanted >= 0) & (wanted < limits[scale_of][:, None]), found, pad)
