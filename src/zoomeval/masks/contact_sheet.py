"""A contact sheet: one PNG on which a person checks at a glance that the masks fit their images.

One row per image and four tiles per row: the image with its boxes and the mask overlaid, the mask, the
FGSet and the BGSet (exactly what :func:`zoomeval.masks.apply_variant` hands the models).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw

from zoomeval.core.images import load_rgb
from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.masks.boxes import apply_variant, decode_mask

COLUMNS = ("boxes + mask", "mask", "FGSet", "BGSet")
HEADER = 16  # height of the column-title row: PIL's default font is about 11 px high
GAP = 2  # stripe around every tile, so that the black areas of neighbouring tiles stay apart
BACKGROUND = (208, 208, 208)
LETTERBOX = (48, 48, 48)
BOX_COLOUR = (0, 255, 0)
TINT = np.array([255, 0, 0])


def contact_sheet(
    records: Sequence[Record],
    masks: dict[str, bytes],
    path: str | os.PathLike[str],
    max_images: int = 24,
    tile: int = 160,
) -> None:
    """Write the sheet of the first ``max_images`` records as a PNG of ``GAP + 4 * (tile + GAP)`` by
    ``HEADER + rows * (tile + GAP)`` pixels."""
    rows = records[:max_images]
    step = tile + GAP
    sheet = Image.new("RGB", (GAP + len(COLUMNS) * step, HEADER + len(rows) * step), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    for c, title in enumerate(COLUMNS):
        left, top, right, bottom = draw.textbbox((0, 0), title)
        xy = (GAP + c * step + (tile - right - left) // 2, (HEADER - bottom - top) // 2)
        draw.text(xy, title, fill=(0, 0, 0))
    for r, record in enumerate(rows):
        for c, image in enumerate(_tiles(record, masks[record.image_id], tile)):
            sheet.paste(image, (GAP + c * step, HEADER + r * step))
    with atomic_path(path) as tmp:
        sheet.save(tmp, format="PNG")


def _tiles(record: Record, mask_png: bytes, tile: int) -> list[Image.Image]:
    # Decoded as ZoomCrops decodes it, so that the sheet shows the pixels the models see.
    image = load_rgb(record)
    mask = decode_mask(mask_png)
    fgset, bgset = apply_variant(image, mask, "fgset"), apply_variant(image, mask, "bgset")  # also checks the shape

    scale = tile / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    # NEAREST keeps the mask binary, so its tile is white exactly on the (scaled) mask.
    mask_thumb = Image.fromarray(mask).resize(size, Image.Resampling.NEAREST)
    # Tinted at tile size: the same picture as tinting the full image, at a fraction of the cost.
    pixels = np.asarray(image.resize(size, Image.Resampling.BILINEAR))
    on = np.asarray(mask_thumb)
    tinted = pixels.copy()
    tinted[on] = (pixels[on].astype(np.int64) * 3 + TINT * 2) // 5  # 40 % red, in integers: reproducible
    overlay = Image.fromarray(tinted)
    draw = ImageDraw.Draw(overlay)
    for xmin, ymin, xmax, ymax in record.boxes:
        # Drawn after scaling so that the outline stays 2 px; half-open box -> inclusive pixel rectangle.
        corners = (
            math.floor(xmin * scale),
            math.floor(ymin * scale),
            math.ceil(xmax * scale) - 1,
            math.ceil(ymax * scale) - 1,
        )
        draw.rectangle(corners, outline=BOX_COLOUR, width=2)
    thumbs = [overlay, mask_thumb.convert("RGB"), *(v.resize(size, Image.Resampling.BILINEAR) for v in (fgset, bgset))]

    tiles = []
    for thumb in thumbs:
        boxed = Image.new("RGB", (tile, tile), LETTERBOX)
        boxed.paste(thumb, ((tile - thumb.width) // 2, (tile - thumb.height) // 2))
        tiles.append(boxed)
    # Written on the tile rather than the sheet, so that a long id is clipped at the tile's edge.
    label = ImageDraw.Draw(tiles[0])
    label.rectangle(label.textbbox((2, 1), record.image_id), fill=(0, 0, 0))
    label.text((2, 1), record.image_id, fill=(255, 255, 255))
    return tiles
