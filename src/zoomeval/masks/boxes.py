"""Foreground masks and the FGSet / BGSet pixel rules.

A mask is a boolean ``H x W`` array, True on the object(s). The variants keep the image size, so the
zoom geometry of a variant is the same as that of the original image:

* ``original``: the image as it is;
* ``fgset`` (object only): every pixel outside the mask is black;
* ``bgset`` (background only): every pixel inside the mask is black.

Kept pixels are bit-identical to the original.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from zoomeval import __version__
from zoomeval.core.io import write_parquet
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record

VARIANTS = ("original", "fgset", "bgset")


def box_mask(width: int, height: int, boxes: Sequence[Sequence[int]]) -> np.ndarray:
    """The union of half-open pixel boxes ``[xmin, ymin, xmax, ymax]``, clipped to the image."""
    mask = np.zeros((height, width), dtype=bool)
    for xmin, ymin, xmax, ymax in boxes:
        mask[max(ymin, 0) : max(min(ymax, height), 0), max(xmin, 0) : max(min(xmax, width), 0)] = True
    return mask


def apply_variant(image: Image.Image, mask: np.ndarray | None, variant: str) -> Image.Image:
    """The ``variant`` of an RGB image under ``mask`` (``None`` is only allowed for ``original``)."""
    if variant == "original":
        return image
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    if mask is None:
        raise ValueError(f"variant {variant!r} needs a mask")
    pixels = np.asarray(image.convert("RGB"))
    if mask.shape != pixels.shape[:2]:
        raise ValueError(f"mask shape {mask.shape} does not match image shape {pixels.shape[:2]}")
    blank = ~mask if variant == "fgset" else mask
    out = pixels.copy()
    out[blank] = 0
    return Image.fromarray(out)  # uint8 H×W×3: RGB (the mode argument is deprecated)


def encode_mask(mask: np.ndarray) -> bytes:
    """A mask as a 1-bit PNG (lossless and small)."""
    buf = io.BytesIO()
    Image.fromarray(mask).convert("1").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def decode_mask(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("1"), dtype=bool)


MASKS_SCHEMA_VERSION = 1
declare("masks", schema_version=MASKS_SCHEMA_VERSION)


def write_box_masks(path: str | os.PathLike[str], records: Sequence[Record], dataset: str) -> None:
    """One row per image: its box-union mask as a 1-bit PNG, the mask's area fraction and object count."""
    masks = [box_mask(r.width, r.height, r.boxes) for r in records]
    table = pa.table(
        {
            "image_id": [r.image_id for r in records],
            "method": ["bbox"] * len(records),
            "mask_png": [encode_mask(m) for m in masks],
            "area_fraction": pa.array([float(m.mean()) if m.size else 0.0 for m in masks], pa.float32()),
            "n_objects": pa.array([len(r.boxes) for r in records], pa.int16()),
        }
    )
    meta = {
        "kind": "masks",
        "schema_version": MASKS_SCHEMA_VERSION,
        "dataset": dataset,
        "method": "bbox",
        "zoomeval": __version__,
    }
    write_parquet(path, table, meta)


def read_masks(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """``image_id -> mask PNG`` of a mask file."""
    table = pq.read_table(path, columns=["image_id", "mask_png"])
    return dict(zip(table["image_id"].to_pylist(), table["mask_png"].to_pylist(), strict=True))
