"""The paper's zoom transform: resize the shorter side to S, cut a crop at one of 3x3 anchors.

Geometry (Taesiri et al. 2023, as the authors' ``eval-IN-trained.py`` computes it):

* the shorter side becomes ``S`` with PIL bicubic (PIL antialiases when it shrinks), the longer side
  ``int(S * long / short)`` (torchvision's truncation);
* the resized ``W x H`` image is split with integer arithmetic: ``tile_x = W // 3``,
  ``anchor_x = col * tile_x + tile_x // 2`` and likewise for rows;
* the crop is ``size x size`` with its top-left corner at ``anchor - size // 2``; pixels outside the
  image are black (PIL's ``Image.crop`` fills them with zeros), before any normalisation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from PIL import Image

#: The 27 hand-picked scales of the authors' ``generate_transform_size_list``.
HAND_PICKED_SCALES: tuple[int, ...] = (
    10,
    16,
    32,
    48,
    64,
    96,
    128,
    192,
    224,
    240,
    256,
    288,
    320,
    384,
    448,
    512,
    576,
    640,
    664,
    672,
    680,
    690,
    700,
    720,
    768,
    832,
    896,
)
#: ``[int(x) for x in np.linspace(10, 1024, 10)]``, appended by the authors after the hand-picked list.
LINSPACE_SCALES: tuple[int, ...] = tuple(int(x) for x in np.linspace(10, 1024, 10))


def paper_scales() -> list[int]:
    """The 36 unique scales in the paper's order: the 37 listed values with the second 10 dropped."""
    seen: list[int] = []
    for s in HAND_PICKED_SCALES + LINSPACE_SCALES:
        if s not in seen:
            seen.append(s)
    return seen


#: Scale and anchor of the standard 1-crop baseline (``LOC:1_1_Size:256``).
ONE_CROP = (256, 1, 1)

#: The paper's zoom groups: zoom-in S > 224, zoom-out S < 224, zoom-224 S = 224.
ZOOM_GROUPS = {"in": lambda s: s > 224, "out": lambda s: s < 224, "224": lambda s: s == 224}

#: The aggregation methods (groups of views aggregated into one prediction per image) and their rules, see
#: :mod:`zoomeval.inference.aggregation`; named here so that the tables need not import torch.
AGGREGATION_METHODS = ("zoom_in", "zoom_out", "zoom_224", "five_crop", "ten_crop")
AGGREGATION_RULES = ("max", "mean")


@dataclass(frozen=True, order=True)
class Transform:
    """One zoom transform: shorter side ``scale``, anchor ``row`` (0 = top) and ``col`` (0 = left)."""

    scale: int
    row: int
    col: int

    @property
    def name(self) -> str:
        """The authors' DataFrame index label, e.g. ``LOC:1_1_Size:256``."""
        return f"LOC:{self.row}_{self.col}_Size:{self.scale}"


def transforms(scales: list[int]) -> list[Transform]:
    """All transforms in the authors' DataFrame order: anchors row-major, then scales as listed.

    This order decides ties in the greedy set cover, so it is part of the method.
    """
    if len(set(scales)) != len(scales):
        raise ValueError(f"scales must be unique, got {scales}")
    return [Transform(s, r, c) for r in range(3) for c in range(3) for s in scales]


@dataclass(frozen=True)
class ZoomGrid:
    """The zoom transforms of a study's ``scales`` (unique, in the config's order), built once and carried instead of
    the scales: the :func:`transforms` order, how many views a job predicts, which views each aggregation method
    averages, and a transform's index in that order. Index ``i`` is anchor ``i // len(scales)`` (row-major) at scale
    ``scales[i % len(scales)]``."""

    scales: tuple[int, ...]

    def __init__(self, scales: Iterable[int]) -> None:
        object.__setattr__(self, "scales", tuple(int(s) for s in scales))
        if len(set(self.scales)) != len(self.scales):
            raise ValueError(f"scales must be unique, got {list(self.scales)}")

    @cached_property
    def transforms(self) -> tuple[Transform, ...]:
        """Every transform, in :func:`transforms` order."""
        return tuple(transforms(list(self.scales)))

    @property
    def n_transforms(self) -> int:
        """How many transforms: nine anchors per scale."""
        return 9 * len(self.scales)

    def n_views(self, extra_views: bool = True) -> int:
        """How many crops :func:`all_crops` cuts per image: the transforms, then with ``extra_views`` the aggregation
        methods' :func:`n_extra_views`."""
        return n_views(list(self.scales), extra_views)

    def index(self, scale: int, row: int, col: int) -> int:
        """The index of transform ``(scale, row, col)``; ValueError for one not in the grid."""
        if scale not in self.scales or not (0 <= row < 3 and 0 <= col < 3):
            raise ValueError(f"({scale}, {row}, {col}) is not a transform of the scales {list(self.scales)}")
        return (3 * row + col) * len(self.scales) + self.scales.index(scale)

    def indices(self, scale: np.ndarray, row: np.ndarray, col: np.ndarray) -> np.ndarray:
        """:meth:`index` of many transforms at once (integer arrays), -1 where one is not in the grid."""
        scale, row, col = (np.asarray(a, dtype=np.int64) for a in (scale, row, col))
        if not self.scales:
            return np.full(scale.shape, -1, dtype=np.int64)
        order = np.argsort(self.scales)
        known = np.asarray(self.scales, dtype=np.int64)[order]
        at = np.minimum(np.searchsorted(known, scale), len(known) - 1)
        inside = (known[at] == scale) & (row >= 0) & (row < 3) & (col >= 0) & (col < 3)
        return np.where(inside, (3 * row + col) * len(self.scales) + order[at], -1)

    @cached_property
    def membership(self) -> tuple[tuple[str, ...], np.ndarray]:
        """The aggregation methods these scales support, and a ``(n_views, n_methods)`` bool matrix saying which
        views (the transforms, then the extra views) each one averages (:mod:`zoomeval.inference.aggregation`). A
        method without views (no scale below 224, no 256) is left out. Read-only: one matrix for every caller."""
        order, n_t, extra = self.transforms, self.n_transforms, n_extra_views(list(self.scales))
        members = np.zeros((n_t + extra, len(AGGREGATION_METHODS)), dtype=bool)
        for m, group in enumerate(("in", "out", "224")):
            members[:n_t, m] = [ZOOM_GROUPS[group](t.scale) for t in order]
        if extra:
            one_crop = self.index(*ONE_CROP)
            five = [one_crop, *range(n_t, n_t + 4)]  # 1-crop view, then the four corners
            members[five, 3] = True
            members[[*five, *range(n_t + 4, n_t + 9)], 4] = True  # and the five mirror images
        keep = members.any(axis=0)
        members = members[:, keep]
        members.flags.writeable = False
        return tuple(AGGREGATION_METHODS[m] for m in np.flatnonzero(keep)), members


def resized_size(width: int, height: int, scale: int) -> tuple[int, int]:
    """``(W, H)`` after torchvision's ``Resize(scale)``: shorter side = scale, longer side truncated."""
    if width <= height:
        return scale, int(scale * height / width)
    return int(scale * width / height), scale


def resized_sizes(widths: np.ndarray, heights: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`resized_size` of many images at once (int64 arrays)."""
    widths, heights = np.asarray(widths, dtype=np.int64), np.asarray(heights, dtype=np.int64)
    portrait = widths <= heights
    new_w = np.where(portrait, scale, (scale * widths / heights).astype(np.int64))
    new_h = np.where(portrait, (scale * heights / widths).astype(np.int64), scale)
    return new_w, new_h


def resize_shorter(image: Image.Image, scale: int) -> Image.Image:
    """Resize so the shorter side is ``scale`` with PIL bicubic (antialiased), keeping the aspect."""
    size = resized_size(image.width, image.height, scale)
    if size == image.size:
        return image
    return image.resize(size, Image.Resampling.BICUBIC)


def crop_box(width: int, height: int, row: int, col: int, size: int = 224) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` of the crop at anchor (row, col) of a ``width x height`` image."""
    if not (0 <= row < 3 and 0 <= col < 3):
        raise ValueError(f"anchor must be in 0..2, got row={row} col={col}")
    tile_x, tile_y = width // 3, height // 3
    left = col * tile_x + tile_x // 2 - size // 2
    top = row * tile_y + tile_y // 2 - size // 2
    return left, top, left + size, top + size


def zoom_crop(image: Image.Image, scale: int, row: int, col: int, size: int = 224) -> Image.Image:
    """Apply the zoom transform T(scale, row, col) to an RGB PIL image; returns a ``size x size`` image.

    Row 0 is the top anchor row, col 0 the left column. Pixels outside the resized image are black.
    This is the reference implementation; :func:`crop_array` cuts the same crops from an array.
    """
    resized = resize_shorter(image.convert("RGB"), scale)
    return resized.crop(crop_box(resized.width, resized.height, row, col, size))


def crop_array(resized: np.ndarray, row: int, col: int, size: int = 224) -> np.ndarray:
    """The crop of :func:`zoom_crop` cut from an already resized ``H x W x C`` uint8 array."""
    height, width = resized.shape[:2]
    left, top, _, _ = crop_box(width, height, row, col, size)
    return _cut(resized, left, top, size)


def _cut(pixels: np.ndarray, left: int, top: int, size: int) -> np.ndarray:
    """The ``size x size`` crop with top-left corner (left, top); pixels outside the image are black."""
    out = np.zeros((size, size) + pixels.shape[2:], dtype=pixels.dtype)
    _paste(out, pixels, left, top)
    return out


def _paste(out: np.ndarray, pixels: np.ndarray, left: int, top: int) -> None:
    """Copy the crop of ``pixels`` with top-left corner (left, top) into the zeroed square ``out``, leaving
    outside pixels black."""
    height, width, size = pixels.shape[0], pixels.shape[1], out.shape[0]
    x0, y0 = max(left, 0), max(top, 0)
    x1, y1 = min(left + size, width), min(top + size, height)
    if x0 < x1 and y0 < y1:
        out[y0 - top : y1 - top, x0 - left : x1 - left] = pixels[y0:y1, x0:x1]


RESIZE_BACKENDS = ("pil", "torch")


def resize_array(pixels: np.ndarray, scale: int, backend: str = "pil") -> np.ndarray:
    """:func:`resize_shorter` of an ``H x W x 3`` uint8 array.

    ``pil`` is the reference. ``torch`` uses torch's uint8 bicubic antialiased kernel on the CPU, which
    was written to match PIL (at most 2 grey levels apart, see tests/test_zoom.py) and is about 4x faster.
    """
    height, width = pixels.shape[:2]
    size = resized_size(width, height, scale)
    if size == (width, height):
        return pixels
    if backend == "pil":
        return np.asarray(Image.fromarray(pixels).resize(size, Image.Resampling.BICUBIC))
    if backend == "torch":
        import torch

        batch = torch.from_numpy(pixels).permute(2, 0, 1)[None]  # NCHW view with channels-last strides
        out = torch.nn.functional.interpolate(batch, size=size[::-1], mode="bicubic", antialias=True)
        return out[0].permute(1, 2, 0).numpy()
    raise ValueError(f"unknown resize backend {backend!r}; expected one of {RESIZE_BACKENDS}")


def corner_crops(resized: np.ndarray, size: int = 224) -> np.ndarray:
    """The four corner crops of the standard 5-crop (torchvision's ``FiveCrop``): top-left, top-right,
    bottom-left, bottom-right, each flush with the image's corner (black-padded where the image is smaller
    than the crop)."""
    height, width = resized.shape[:2]
    return np.stack([_cut(resized, x, y, size) for y in (0, height - size) for x in (0, width - size)])


def n_extra_views(scales: list[int]) -> int:
    """How many views :func:`all_crops` appends for the 5-crop and 10-crop methods: nine when the 1-crop
    transform's scale is there, else none."""
    return 9 if ONE_CROP[0] in scales else 0


def n_views(scales: list[int], extra_views: bool) -> int:
    """How many crops :func:`all_crops` returns."""
    return 9 * len(scales) + (n_extra_views(scales) if extra_views else 0)


def all_crops(
    image: Image.Image, scales: list[int], size: int = 224, backend: str = "pil", extra_views: bool = False
) -> np.ndarray:
    """Every crop of ``image`` as a ``(len(transforms(scales)), size, size, 3)`` uint8 array.

    The image is resized once per scale and each resized copy is cut nine times; the crops come out in
    :func:`transforms` order. With ``extra_views``, :func:`n_extra_views` more follow, cut from the 1-crop
    scale's copy: the four :func:`corner_crops`, then the horizontal mirror images of the top-left,
    top-right, 1-crop, bottom-left and bottom-right crops (see :mod:`zoomeval.inference.aggregation`).
    """
    pixels = np.array(image.convert("RGB"))  # a writable copy, so torch can wrap it without a warning
    out = np.zeros((n_views(scales, extra_views), size, size, 3), dtype=np.uint8)
    return cut_all(out, (resize_array(pixels, scale, backend) for scale in scales), scales)


def cut_all(out: np.ndarray, resized: Iterable[np.ndarray], scales: list[int]) -> np.ndarray:
    """Fill the zeroed ``out`` (``(n_views, size, size, 3)``) with the crops of :func:`all_crops` from the
    image resized to each of ``scales`` in turn."""
    n, size, extra_views = len(scales), out.shape[1], len(out) > 9 * len(scales)
    for k, (scale, pixels) in enumerate(zip(scales, resized, strict=True)):
        height, width = pixels.shape[0], pixels.shape[1]
        for slot, left, top, mirrored in scale_views(k, n, scale, width, height, size, extra_views):
            _paste(out[slot], pixels, left, top)
            if mirrored:
                out[slot] = out[slot][:, ::-1]
    return out


def scale_views(
    k: int, n: int, scale: int, width: int, height: int, size: int, extra_views: bool
) -> list[tuple[int, int, int, bool]]:
    """The views :func:`all_crops` cuts from scale ``k`` of its ``n`` scales, resized to ``width x height``:
    ``(slot in the output, left, top, mirrored)``, a mirrored view being the horizontal mirror image of the crop
    at (left, top). The nine anchors go to slots ``anchor * n + k``; the 1-crop scale adds the four corner crops
    and the five mirror images after the ``9 * n`` transforms."""
    views = []
    for anchor in range(9):
        views.append((anchor * n + k, *crop_box(width, height, anchor // 3, anchor % 3, size)[:2], False))
    if extra_views and scale == ONE_CROP[0]:
        corners = [(x, y) for y in (0, height - size) for x in (0, width - size)]
        views += [(9 * n + j, x, y, False) for j, (x, y) in enumerate(corners)]
        one_crop = views[3 * ONE_CROP[1] + ONE_CROP[2]][1:3]
        mirrored = [corners[0], corners[1], one_crop, corners[2], corners[3]]
        views += [(9 * n + 4 + j, x, y, True) for j, (x, y) in enumerate(mirrored)]
    return views
