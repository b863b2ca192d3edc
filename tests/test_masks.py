"""FGSet / BGSet pixel rules and mask storage."""

import numpy as np
import pytest
from PIL import Image

from zoomeval.masks.boxes import apply_variant, box_mask, decode_mask, encode_mask


def test_box_mask_is_the_half_open_union_clipped_to_the_image():
    mask = box_mask(6, 4, [(1, 1, 3, 3), (2, 0, 4, 2), (5, 3, 9, 9)])
    expected = np.array(
        [
            [0, 0, 1, 1, 0, 0],
            [0, 1, 1, 1, 0, 0],
            [0, 1, 1, 0, 0, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        dtype=bool,
    )
    assert np.array_equal(mask, expected)
    assert not box_mask(6, 4, []).any()


def test_variants_black_out_the_right_pixels_and_keep_the_rest_bit_identical():
    rng = np.random.default_rng(1)
    pixels = rng.integers(1, 256, (40, 60, 3), dtype=np.uint8)  # no black pixel in the source
    image = Image.fromarray(pixels, "RGB")
    mask = box_mask(60, 40, [(5, 5, 20, 30), (15, 10, 50, 20)])
    fg = np.asarray(apply_variant(image, mask, "fgset"))
    bg = np.asarray(apply_variant(image, mask, "bgset"))
    assert fg.shape == bg.shape == pixels.shape
    assert np.array_equal(fg[mask], pixels[mask]) and (fg[~mask] == 0).all()
    assert np.array_equal(bg[~mask], pixels[~mask]) and (bg[mask] == 0).all()
    assert (fg.astype(int) + bg == pixels).all()
    assert apply_variant(image, None, "original") is image
    with pytest.raises(ValueError):
        apply_variant(image, None, "bgset")
    with pytest.raises(ValueError):
        apply_variant(image, mask[:10], "fgset")


def test_mask_png_round_trip():
    mask = box_mask(97, 33, [(3, 4, 50, 30)])
    data = encode_mask(mask)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(decode_mask(data), mask)
