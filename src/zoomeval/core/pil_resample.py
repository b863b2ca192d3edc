"""Pillow's 8-bit bicubic resize coefficients, computed as Pillow computes them, for an exact device resize.

Pillow (``libImaging/Resample.c``) resizes in two separable passes, each rounded to uint8. Output pixel ``j`` of a
pass is ``clip8((2**21 + sum_i in[i] * kk[j, i]) >> 22)`` in int32, with integer coefficients ``kk``: the bicubic
weights (a = -0.5) over a window of ``2 * max(in / out, 1)`` input pixels on each side of the output pixel's
centre, normalised to sum 1 and scaled by ``2**22`` (``precompute_coeffs``, then ``normalize_coeffs_8bpc``). This
module computes the same coefficients with the same double-precision operations in the same order (on the host);
the device path (:mod:`zoomeval.inference.device_resize`) then does Pillow's integer sums, exact in any order.
"""

from __future__ import annotations

import math

import numpy as np

#: Fractional bits of Pillow's fixed-point coefficients (``PRECISION_BITS``).
PRECISION_BITS = 22
#: The bicubic filter's support in input pixels at scale 1 (``BICUBIC`` in ``Resample.c``).
SUPPORT = 2.0


def bicubic(x: np.ndarray) -> np.ndarray:
    """Pillow's ``bicubic_filter`` (a = -0.5), with its operations in its order."""
    x = np.abs(x)
    near = ((1.5 * x - 2.5) * x) * x + 1.0
    far = ((((x - 5.0) * x) + 8.0) * x - 4.0) * -0.5
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def taps(in_size: int, out_size: int, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pillow's integer coefficients resizing ``in_size`` pixels to ``out_size``, for the output pixels ``outputs``,
    as ``(j, x, kk)``: the coefficient of input pixel ``x[i]`` in output pixel ``outputs[j[i]]`` is ``kk[i]``
    (integral float64 values, made int32 for the device); every other coefficient is zero."""
    outputs = np.asarray(outputs, dtype=np.int64)
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = SUPPORT * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    center = (outputs + 0.5) * scale
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)  # astype truncates towards zero, as C's (int)
    xmax = np.minimum((center + support + 0.5).astype(np.int64), in_size) - xmin
    offsets = np.arange(ksize)
    inside = offsets[None, :] < xmax[:, None]
    weights = bicubic(((offsets[None, :] + xmin[:, None]) - center[:, None] + 0.5) * (1.0 / filterscale))
    weights = np.where(inside, weights, 0.0)
    total = np.zeros(len(outputs))
    for k in range(ksize):  # Pillow sums the weights one after the other; the order decides the last bit
        total = total + weights[:, k]
    weights = np.divide(weights, total[:, None], out=weights, where=total[:, None] != 0.0)
    scaled = weights * float(1 << PRECISION_BITS)
    kk = np.trunc(np.where(weights < 0, scaled - 0.5, scaled + 0.5))  # C's (int)(x -/+ 0.5)
    j, k = np.nonzero(inside)
    return j, xmin[j] + k, kk[j, k]


def vertical_first(width: int, height: int, new_width: int, new_height: int) -> bool:
    """Whether Pillow 13 resizes the height before the width (``ImagingResampleInner``): when it shrinks the height
    by more than twice as many pixels as the width. Pillow 12 always did the width first."""
    return height - new_height > 0 and height - new_height > 2 * (width - new_width)
