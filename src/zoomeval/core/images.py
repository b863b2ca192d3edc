"""Decoding images as the models see them, and the policy for images that cannot be decoded.

Policy (applied the same way everywhere an image is decoded: the study's jobs, ``zoomeval predict`` and
:class:`zoomeval.ZoomTTA`, each through :func:`to_rgb`, and the last two also through :func:`too_large` at the scales
they resize to):

* every PIL mode of 8 bits per channel (:data:`EIGHT_BIT`) becomes RGB as PIL's ``convert("RGB")`` makes it:
  bilevel and greyscale replicated, a palette looked up, CMYK, YCbCr, LAB and HSV converted by PIL's formulas, an
  alpha channel dropped (the colour under transparent pixels is kept, as torchvision's loader does; premultiplied
  ``RGBa`` is un-premultiplied first);
* 16-bit greyscale (``I;16`` and its byte orders) is scaled to 8 bits (``>> 8``) rather than clipped at 255 as PIL
  would; so is mode ``I`` (32-bit integers: how Pillow opens a 16-bit PGM, or a 32-bit TIFF) when every value is
  within 0..65535;
* no other image has an 8-bit mapping, and each is a bad image (its reason ends in :data:`NO_MAPPING`): mode ``I``
  with a value outside 0..65535 (``>> 8`` would wrap around in uint8, clipping would whiten it), mode ``F``
  (32-bit floats) with a value that is not a whole number in 0..255 (PIL would truncate and clip it), and any other
  mode (``La``, which PIL cannot convert);
* EXIF orientation is ignored, as in the authors' pipeline and torchvision: the stored pixels are used;
* images over PIL's decompression-bomb limit (``Image.MAX_IMAGE_PIXELS``, about 179 megapixels for the
  error) are refused;
* a manifest's ``border`` is cropped from every side.

When a manifest is built, every image is read and decoded once (:func:`screen`), and the sha256 of the bytes read
becomes the record's ``sha256`` (an audit finds the image by it, :mod:`zoomeval.audit.study`). An image cannot be
used when it is unreadable (empty or truncated file, bomb, unknown format), when its mode has no 8-bit RGB mapping
(above), when its decoded size differs from the size its dataset's annotations give, or when resizing it to the
largest scale would exceed ``max_resized_pixels``
(a 1 x 8000 PNG of 117 bytes becomes 256 x 2,048,000 pixels at S = 256). Such images are listed in
``bad_images.csv`` and in the job's log, and either left out (``on_bad_image: skip``) or stop the job
(``fail``). Images that an adapter wrote out (ImageNet-Hard's Parquet rows) are
listed with their ``source`` (shard and row).
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import os
import warnings
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO

import numpy as np
from PIL import Image

from zoomeval.core.config import MAX_RESIZED_PIXELS
from zoomeval.core.io import write_csv
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import resized_size

log = logging.getLogger(__name__)

#: Bad images named in an error message (all of them go to the log).
SHOWN_IN_MESSAGE = 5


#: The modes of 8 bits per channel, made RGB by PIL's own conversion.
EIGHT_BIT = frozenset({"1", "L", "P", "PA", "LA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"})
#: The integer greyscale modes, scaled by ``>> 8`` (mode ``I`` only within 16 bits).
SIXTEEN_BIT = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I"})
#: How the reason :func:`to_rgb` gives for an image without an 8-bit mapping ends (what :func:`bad_kind` reads).
NO_MAPPING = "no 8-bit RGB mapping"


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as 8-bit RGB under the policy above; ``ValueError`` (ending in :data:`NO_MAPPING`) for an image
    without such a mapping."""
    if image.mode in EIGHT_BIT:
        return image.convert("RGB")
    if image.mode in SIXTEEN_BIT:
        pixels = np.asarray(image, dtype=np.int64)
        low, high = (int(pixels.min()), int(pixels.max())) if pixels.size else (0, 0)
        if low < 0 or high > 0xFFFF:
            raise ValueError(f"mode {image.mode} with values {low}..{high}, beyond 16 bits: {NO_MAPPING}")
        # PIL's own conversion clips 16-bit values at 255 (a white image); scale them instead.
        return Image.fromarray((pixels >> 8).astype(np.uint8)).convert("RGB")
    if image.mode == "F":
        pixels = np.asarray(image, dtype=np.float64)
        if not np.isin(pixels, np.arange(256)).all():  # NaN and infinities too
            raise ValueError(f"mode F with values that are not whole numbers in 0..255: {NO_MAPPING}")
        return image.convert("RGB")  # exact on whole numbers in range
    raise ValueError(f"mode {image.mode}: {NO_MAPPING}")


def opened(path: str | os.PathLike[str] | IO[bytes]) -> Image.Image:
    """``path`` opened (its header read, its pixels not yet), an image over PIL's decompression-bomb limit refused
    (:class:`PIL.Image.DecompressionBombWarning` raised, not warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        return Image.open(path)


def load_rgb(record: Record) -> Image.Image:
    """A record's image as evaluated: decoded once, RGB, ``border`` cropped, size checked (a refusal names the file:
    a manifest built before a check existed may still list the image)."""
    with Image.open(record.path) as raw:
        try:
            image = to_rgb(raw)
        except ValueError as exc:
            raise ValueError(f"{record.path}: {exc}") from None
    if b := record.border:
        image = image.crop((b, b, image.width - b, image.height - b))
    if (image.width, image.height) != (record.width, record.height):
        raise ValueError(f"{record.path}: size {image.size} differs from the manifest's")
    return image


def problem(path: str | IO[bytes], size: tuple[int, int] | None = None, border: int = 0) -> str | None:
    """Why ``path`` (a file name or the file's bytes) cannot be decoded, or (given the ``size`` expected after
    cropping ``border``) why its decoded size differs; ``None`` if neither."""
    try:
        with opened(path) as img:
            img.load()  # a full decode: truncated data only shows here
            to_rgb(img)
            decoded = (img.width - 2 * border, img.height - 2 * border)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return f"{type(exc).__name__}: {exc}"
    if size is not None and decoded != size:
        return f"decoded size {decoded[0]}x{decoded[1]} differs from the {size[0]}x{size[1]} its annotation gives"
    return None


def too_large(width: int, height: int, scale: int, max_pixels: int) -> str | None:
    """Why resizing a ``width x height`` image to ``scale`` (:func:`zoomeval.core.zoom.resized_size`, the resize that
    inference does) would exceed ``max_pixels``, or ``None``."""
    new_w, new_h = resized_size(width, height, scale)
    if new_w * new_h <= max_pixels:
        return None
    return (
        f"resized to S={scale} it would be {new_w}x{new_h} = {new_w * new_h} pixels, over max_resized_pixels "
        f"({max_pixels})"
    )


class _FileBytes(io.BytesIO):
    """A file's bytes, shown as its path (PIL's errors name what they read)."""

    def __init__(self, path: str) -> None:
        super().__init__(Path(path).read_bytes())
        self.path = path

    def __repr__(self) -> str:
        return repr(self.path)


def _record_problem(record: Record, max_scale: int, max_pixels: int) -> tuple[str | None, str]:
    """Why the record's image cannot be used (or None), and the sha256 of its bytes (read once, for both)."""
    try:
        data = _FileBytes(record.path)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}", ""
    why = problem(data, (record.width, record.height), record.border)
    digest = hashlib.sha256(data.getbuffer()).hexdigest()
    return why or too_large(record.width, record.height, max_scale, max_pixels), digest


def screened(
    records: Sequence[Record], max_scale: int, max_pixels: int = MAX_RESIZED_PIXELS, workers: int = 1
) -> list[tuple[Record, str | None]]:
    """Every record with its image's ``sha256`` set, and why it cannot be used (see the module's docstring; None: it
    can), in manifest order; ``max_scale`` is the largest configured scale."""
    check = partial(_record_problem, max_scale=max_scale, max_pixels=max_pixels)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            found = list(pool.map(check, records, chunksize=64))
    else:
        found = [check(r) for r in records]
    return [(replace(r, sha256=digest), why) for r, (why, digest) in zip(records, found, strict=True)]


def bad_kind(reason: str) -> str:
    """The kind of a bad image's reason (as :func:`problem` and :func:`too_large` word them), for the tables."""
    if reason.startswith("decoded size"):
        return "size differs from its annotation"
    if "over max_resized_pixels" in reason:
        return "over max_resized_pixels"
    if reason.endswith(NO_MAPPING):
        return NO_MAPPING
    return "unreadable"


def bad_kinds(report: str | os.PathLike[str]) -> dict[str, int]:
    """The images of a ``bad_images.csv`` that :func:`screen` wrote, counted by kind (:func:`bad_kind`)."""
    with open(report, newline="") as fh:
        return dict(Counter(bad_kind(row["reason"]) for row in csv.DictReader(fh)))


def screen(
    records: list[Record],
    policy: str,
    report: str | os.PathLike[str],
    *,
    dataset: str,
    max_scale: int,
    max_pixels: int = MAX_RESIZED_PIXELS,
    workers: int = 1,
) -> tuple[list[Record], int]:
    """Apply ``on_bad_image`` to the records of ``dataset``: log every bad image, write ``report`` (image_id,
    path, reason, source) and return the usable records (each with its image's sha256) and how many were left out.
    Raises when ``policy`` is ``fail`` and there is a bad image, or when no image is usable; the message lists the
    first bad images itself, since Snakemake deletes ``report`` when the job fails."""
    checked = screened(records, max_scale, max_pixels, workers)
    bad = [(r, why) for r, why in checked if why is not None]
    for record, why in bad:
        log.warning("bad image %s: %s", record.source or record.path, why)
    write_csv(report, ["image_id", "path", "reason", "source"], ([r.image_id, r.path, why, r.source] for r, why in bad))
    kept = [r for r, why in checked if why is None]
    if bad and (policy == "fail" or not kept):
        shown = "; ".join(f"{r.source or r.path} ({why})" for r, why in bad[:SHOWN_IN_MESSAGE])
        more = f"; and {len(bad) - SHOWN_IN_MESSAGE} more" if len(bad) > SHOWN_IN_MESSAGE else ""
        what = f"{len(bad)} of its {len(records)} images cannot" if kept else f"none of its {len(records)} images can"
        fix = "fix or remove them" + (", or set on_bad_image: skip to leave them out" if kept else "")
        raise ValueError(
            f"dataset {dataset!r}: {what} be used: {shown}{more} (each is listed in this job's log); {fix}"
        )
    return kept, len(bad)
