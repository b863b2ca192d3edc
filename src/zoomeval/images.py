"""Decoding images as the models see them, and the policy for images that cannot be decoded.

Policy (applied the same way everywhere an image is decoded):

* any PIL mode becomes RGB: greyscale is replicated, CMYK converted, an alpha channel dropped (the colour
  under transparent pixels is kept, as torchvision's loader does); 16-bit greyscale is scaled to 8 bits
  (``>> 8``) rather than clipped;
* EXIF orientation is ignored, as in the authors' pipeline and torchvision: the stored pixels are used;
* images over PIL's decompression-bomb limit (``Image.MAX_IMAGE_PIXELS``, about 179 megapixels for the
  error) are refused;
* a manifest's ``border`` is cropped from every side.

Unreadable images (empty or truncated files, bombs, unknown formats) are found once, when a manifest is
built (:func:`find_bad_images`), and either listed in ``bad_images.csv`` and left out (``on_bad_image:
skip``) or stop the job (``fail``). Images that an adapter wrote out (ImageNet-Hard's Parquet rows) are
listed with their ``source`` (shard and row).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image

from zoomeval.io import write_csv
from zoomeval.manifest import Record


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as 8-bit RGB under the policy above."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # PIL's own conversion clips 16-bit values at 255 (a white image); scale them instead.
        pixels = np.asarray(image, dtype=np.uint32) >> 8
        return Image.fromarray(pixels.astype(np.uint8), "L").convert("RGB")
    return image.convert("RGB")


def load_rgb(record: Record) -> Image.Image:
    """A record's image as evaluated: decoded once, RGB, ``border`` cropped, size checked."""
    with Image.open(record.path) as raw:
        image = to_rgb(raw)
    if b := record.border:
        image = image.crop((b, b, image.width - b, image.height - b))
    if (image.width, image.height) != (record.width, record.height):
        raise ValueError(f"{record.path}: size {image.size} differs from the manifest's")
    return image


def problem(path: str) -> str | None:
    """Why ``path`` cannot be decoded, or ``None`` if it can."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)  # refuse, don't just warn
            with Image.open(path) as img:
                img.load()  # a full decode: truncated data only shows here
                to_rgb(img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def find_bad_images(records: Sequence[Record], workers: int = 1) -> list[tuple[Record, str]]:
    """The records whose image cannot be decoded, with the reason, in manifest order."""
    paths = [r.path for r in records]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            reasons = list(pool.map(problem, paths, chunksize=64))
    else:
        reasons = [problem(p) for p in paths]
    return [(r, why) for r, why in zip(records, reasons, strict=True) if why is not None]


def screen(
    records: list[Record], policy: str, report: str | os.PathLike[str], workers: int = 1
) -> tuple[list[Record], int]:
    """Apply ``on_bad_image`` to ``records``: write ``report`` (image_id, path, reason, source) and return the
    readable records and how many were left out; ``fail`` raises on the first bad image instead."""
    bad = find_bad_images(records, workers)
    write_csv(report, ["image_id", "path", "reason", "source"], ([r.image_id, r.path, why, r.source] for r, why in bad))
    if bad and policy == "fail":
        record, why = bad[0]
        first = record.source or record.path
        raise ValueError(
            f"{len(bad)} image(s) cannot be decoded, first {first} ({why}); see {report}, or set "
            "on_bad_image: skip to leave them out"
        )
    dropped = {r.image_id for r, _ in bad}
    return [r for r in records if r.image_id not in dropped], len(bad)
