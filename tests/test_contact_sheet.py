"""The mask contact sheet: geometry, tile contents, truncation and reproducibility."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from zoomeval.core.manifest import Record
from zoomeval.masks.boxes import box_mask, encode_mask
from zoomeval.masks.contact_sheet import GAP, HEADER, contact_sheet

TILE = 48
STEP = TILE + GAP
WHITE, BLACK, GREEN = (255, 255, 255), (0, 0, 0), (0, 255, 0)


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[list[Record], dict[str, bytes]]:
    rng = np.random.default_rng(0)
    specs = [  # image_id, width, height, boxes, border
        ("wide", 64, 48, [(16, 12, 48, 36)], 0),
        ("tall", 40, 80, [(5, 10, 30, 60)], 2),
        ("square", 50, 50, [(0, 0, 10, 10), (30, 30, 50, 50)], 0),
    ]
    records, masks = [], {}
    for image_id, width, height, boxes, border in specs:
        # No black source pixel, so black in a variant tile can only come from the mask.
        pixels = np.full((height + 2 * border, width + 2 * border, 3), (255, 0, 0), dtype=np.uint8)
        pixels[border : border + height, border : border + width] = rng.integers(1, 256, (height, width, 3))
        path = tmp_path / f"{image_id}.png"
        Image.fromarray(pixels, "RGB").save(path)
        records.append(Record(image_id, str(path), [1], ["n01"], width, height, boxes, border=border))
        masks[image_id] = encode_mask(box_mask(width, height, boxes))
    return records, masks


def sheet_pixel(sheet: np.ndarray, record: Record, row: int, col: int, x: int, y: int) -> tuple[int, ...]:
    """The sheet pixel showing image pixel ``(x, y)`` of ``record`` in tile ``(row, col)``."""
    scale = TILE / max(record.width, record.height)
    width, height = round(record.width * scale), round(record.height * scale)
    sx = GAP + col * STEP + (TILE - width) // 2 + int((x + 0.5) * scale)
    sy = HEADER + row * STEP + (TILE - height) // 2 + int((y + 0.5) * scale)
    return tuple(int(v) for v in sheet[sy, sx])


def test_sheet_geometry_and_tiles(tmp_path: Path, dataset: tuple[list[Record], dict[str, bytes]]) -> None:
    records, masks = dataset
    out = tmp_path / "sheets" / "masks.png"
    contact_sheet(records, masks, out, tile=TILE)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.mode == "RGB"
        assert img.size == (GAP + 4 * STEP, HEADER + 3 * STEP)
        sheet = np.asarray(img)
    assert sheet.var() > 0

    wide, tall = records[0], records[1]
    inside, outside = (32, 24), (4, 42)  # well clear of the box edge, so resampling cannot blur them
    assert sheet_pixel(sheet, wide, 0, 1, *inside) == WHITE
    assert sheet_pixel(sheet, wide, 0, 1, *outside) == BLACK
    mask_tile = sheet[HEADER : HEADER + TILE, GAP + STEP : GAP + STEP + TILE]
    assert set(np.unique(mask_tile)) == {0, 48, 255}  # binary mask on the grey letterbox, no blurred edge
    assert tuple(mask_tile[5, 0]) == (48, 48, 48) and tuple(mask_tile[6, 0]) == BLACK  # 36-px-high image, centred
    assert sheet_pixel(sheet, wide, 0, 2, *outside) == BLACK
    assert sheet_pixel(sheet, wide, 0, 2, *inside) != BLACK
    assert sheet_pixel(sheet, wide, 0, 3, *inside) == BLACK
    assert sheet_pixel(sheet, wide, 0, 3, *outside) != BLACK
    assert sheet_pixel(sheet, wide, 0, 0, *inside)[0] >= 102  # tinted 40 % red
    # The box's left edge (x=16 -> tile column 12) is drawn in green, 2 px wide.
    assert tuple(sheet[HEADER + 6 + 18, GAP + 12]) == tuple(sheet[HEADER + 6 + 18, GAP + 13]) == GREEN

    # The bordered image is cropped before masking (a mask-size mismatch would raise) and maps the same way.
    assert sheet_pixel(sheet, tall, 1, 1, 17, 35) == WHITE
    assert sheet_pixel(sheet, tall, 1, 1, 36, 70) == BLACK
    assert sheet_pixel(sheet, tall, 1, 2, 36, 70) == BLACK
    assert sheet_pixel(sheet, tall, 1, 3, 17, 35) == BLACK
    assert sorted(p.name for p in out.parent.iterdir()) == ["masks.png"]  # no temporary file left


def test_max_images_truncates_and_output_is_byte_identical(
    tmp_path: Path, dataset: tuple[list[Record], dict[str, bytes]]
) -> None:
    records, masks = dataset
    full, again, short = tmp_path / "full.png", tmp_path / "again.png", tmp_path / "short.png"
    contact_sheet(records, masks, full, tile=TILE)
    contact_sheet(records, masks, again, tile=TILE)
    assert full.read_bytes() == again.read_bytes()

    contact_sheet(records, masks, short, max_images=2, tile=TILE)
    with Image.open(short) as img_short, Image.open(full) as img_full:
        assert img_short.size == (GAP + 4 * STEP, HEADER + 2 * STEP)
        rows = np.asarray(img_short)
        assert np.array_equal(rows, np.asarray(img_full)[: rows.shape[0]])
