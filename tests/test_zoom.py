"""The zoom transform against hand-computed geometry."""

import numpy as np
import pytest
from PIL import Image

from zoomeval.core.zoom import (
    ONE_CROP,
    Transform,
    ZoomGrid,
    all_crops,
    crop_array,
    crop_box,
    paper_scales,
    resize_array,
    resize_shorter,
    resized_size,
    transforms,
    zoom_crop,
)

PAPER_36 = [
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
    122,
    235,
    348,
    460,
    573,
    686,
    798,
    911,
    1024,
]


def gradient(width: int, height: int) -> Image.Image:
    """An image whose pixel (x, y) encodes its coordinates, so crops can be located exactly."""
    x = np.arange(width)[None, :].repeat(height, 0)
    y = np.arange(height)[:, None].repeat(width, 1)
    arr = np.stack([x % 256, y % 256, (x // 256) * 16 + y // 256 + 1], axis=-1).astype(np.uint8)
    return Image.fromarray(arr, "RGB")


def test_paper_scales_drop_the_duplicate_10_and_keep_the_papers_order():
    assert paper_scales() == PAPER_36
    assert len(paper_scales()) == 36 and len(set(paper_scales())) == 36


def test_324_transforms_in_the_authors_dataframe_order():
    order = transforms(paper_scales())
    assert len(order) == 324 and len(set(order)) == 324
    assert order[0].name == "LOC:0_0_Size:10"
    assert order[35].name == "LOC:0_0_Size:1024"
    assert order[36].name == "LOC:0_1_Size:10"
    assert order[4 * 36 + 10] == Transform(*ONE_CROP) and order[4 * 36 + 10].name == "LOC:1_1_Size:256"
    assert order[-1].name == "LOC:2_2_Size:1024"
    with pytest.raises(ValueError):
        transforms([10, 16, 10])


@pytest.mark.parametrize(
    ("size", "scale", "expected"),
    [
        ((500, 375), 256, (341, 256)),  # landscape: 256 * 500 / 375 = 341.33 -> 341
        ((375, 500), 256, (256, 341)),  # portrait
        ((333, 333), 10, (10, 10)),
        ((1, 1), 224, (224, 224)),
        ((20000, 3), 10, (66666, 10)),  # huge aspect ratio, truncated
        ((641, 479), 1024, (1370, 1024)),  # 1024 * 641 / 479 = 1370.3
    ],
)
def test_resized_size_truncates_the_long_side(size, scale, expected):
    assert resized_size(*size, scale) == expected


def test_crop_box_hand_computed():
    # W=341, H=256: tile_x=113, tile_y=85; centre anchor (56+113, 42+85) = (169, 127) -> left 57, top 15
    assert crop_box(341, 256, 1, 1) == (57, 15, 281, 239)
    # corner anchors: (56, 42) and (282, 212)
    assert crop_box(341, 256, 0, 0) == (56 - 112, 42 - 112, 56 + 112, 42 + 112)
    assert crop_box(341, 256, 2, 2) == (282 - 112, 212 - 112, 282 + 112, 212 + 112)
    # S < 224: a 10x13 image, tile 3x4 -> centre anchor (4, 6)
    assert crop_box(10, 13, 1, 1) == (4 - 112, 6 - 112, 4 + 112, 6 + 112)
    # odd size and row/col are not swapped: row drives y, col drives x
    assert crop_box(1001, 700, 0, 2) == (2 * 333 + 166 - 112, 116 - 112, 2 * 333 + 166 + 112, 116 + 112)
    with pytest.raises(ValueError):
        crop_box(100, 100, 3, 0)


@pytest.mark.parametrize(("width", "height"), [(500, 375), (375, 500), (257, 999), (1, 1), (3000, 2000)])
@pytest.mark.parametrize("scale", [10, 224, 256, 1024])
def test_zoom_crop_matches_hand_geometry_and_pads_black(width, height, scale):
    image = gradient(width, height)
    resized = np.asarray(resize_shorter(image, scale))
    rw, rh = resized_size(width, height, scale)
    assert resized.shape == (rh, rw, 3)
    for row in range(3):
        for col in range(3):
            out = np.asarray(zoom_crop(image, scale, row, col))
            assert out.shape == (224, 224, 3)
            left, top = col * (rw // 3) + (rw // 3) // 2 - 112, row * (rh // 3) + (rh // 3) // 2 - 112
            for y in (0, 111, 223):
                for x in (0, 112, 223):
                    sx, sy = left + x, top + y
                    inside = 0 <= sx < rw and 0 <= sy < rh
                    expected = resized[sy, sx] if inside else np.zeros(3, np.uint8)
                    assert (out[y, x] == expected).all(), (row, col, x, y)


def test_resize_is_pil_bicubic_with_antialias():
    image = gradient(500, 375)
    expected = image.resize((341, 256), Image.Resampling.BICUBIC)
    assert np.array_equal(np.asarray(resize_shorter(image, 256)), np.asarray(expected))
    assert resize_shorter(image, 375) is image  # no-op resize keeps the pixels


def test_crop_array_and_all_crops_equal_the_pil_reference():
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (301, 457, 3), dtype=np.uint8), "RGB")
    scales = [10, 224, 256, 700]
    crops = all_crops(image, scales)
    order = transforms(scales)
    assert crops.shape == (36, 224, 224, 3)
    for k, t in enumerate(order):
        assert np.array_equal(crops[k], np.asarray(zoom_crop(image, t.scale, t.row, t.col))), t
    resized = np.asarray(resize_shorter(image, 700))
    assert np.array_equal(
        crop_array(resized, 2, 0),
        np.asarray(resize_shorter(image, 700).crop(crop_box(resized.shape[1], resized.shape[0], 2, 0))),
    )


def test_torch_resize_backend_is_within_two_levels_of_pil_on_the_demo(tmp_path):
    from zoomeval.datasets.adapters.demo import build_demo

    worst = 0
    for record in build_demo(tmp_path)[::3]:
        with Image.open(record.path) as img:
            pixels = np.array(img.convert("RGB"))
        for scale in paper_scales():
            pil = resize_array(pixels, scale, "pil").astype(int)
            fast = resize_array(pixels, scale, "torch").astype(int)
            assert pil.shape == fast.shape
            worst = max(worst, int(np.abs(pil - fast).max()))
    assert 1 <= worst <= 2  # not bit-identical, but within the documented bound
    with pytest.raises(ValueError, match="unknown resize backend"):
        resize_array(pixels, 100, "cv2")


@pytest.mark.parametrize("scales", [[224], [256, 32, 10], PAPER_36])
def test_the_grid_index_and_its_transform_round_trip_over_every_scale_and_anchor(scales):
    """Brute force over every (scale, row, col) of the scales: each has one index, the indices are 0 to 9 * S - 1,
    and the transform at an index is the one whose index it is, in :func:`transforms` order."""
    grid = ZoomGrid(scales)
    seen = {}
    for scale in scales:
        for row in range(3):
            for col in range(3):
                i = grid.index(scale, row, col)
                assert grid.transforms[i] == Transform(scale, row, col)
                assert i == (3 * row + col) * len(scales) + scales.index(scale)  # anchor-major, then scale as listed
                seen[i] = (scale, row, col)
    assert sorted(seen) == list(range(9 * len(scales))) == list(range(grid.n_transforms))
    assert list(grid.transforms) == transforms(scales)
    every = np.array(list(seen.values()))
    assert grid.indices(every[:, 0], every[:, 1], every[:, 2]).tolist() == list(seen)


def test_the_grid_refuses_what_is_not_one_of_its_transforms():
    grid = ZoomGrid([32, 256])
    for scale, row, col in [(64, 0, 0), (32, 3, 0), (256, 0, -1)]:
        with pytest.raises(ValueError, match="is not a transform of the scales"):
            grid.index(scale, row, col)
    # vectorised: -1 for each of those, the index for the one that is
    got = grid.indices(np.array([64, 32, 256, 256]), np.array([0, 3, 0, 1]), np.array([0, 0, -1, 1]))
    assert got.tolist() == [-1, -1, -1, 9]  # LOC:1_1_Size:256 is anchor 4 of two scales, scale 1
    assert ZoomGrid([]).indices(np.array([32]), np.array([0]), np.array([0])).tolist() == [-1]
    with pytest.raises(ValueError, match="scales must be unique"):
        ZoomGrid([32, 256, 32])


def test_the_grid_counts_the_crops_all_crops_cuts():
    """Counted on real crops: 9 per scale, plus the 9 extra views only where the 1-crop scale (256) is there."""
    image = gradient(40, 30)
    for scales, extra in [([32, 256], 9), ([32, 64], 0)]:
        grid = ZoomGrid(scales)
        assert grid.n_transforms == 9 * len(scales) == len(all_crops(image, scales, 8))
        assert grid.n_views(extra_views=False) == grid.n_transforms
        assert grid.n_views() == grid.n_transforms + extra == len(all_crops(image, scales, 8, extra_views=True))
        assert len(grid.membership[1]) == grid.n_views()


def test_grids_of_the_same_scales_are_equal_and_their_membership_is_read_only():
    grid = ZoomGrid([32, 256])
    assert grid == ZoomGrid((32, 256)) and hash(grid) == hash(ZoomGrid((32, 256))) and grid != ZoomGrid([256, 32])
    assert grid.scales == (32, 256)
    with pytest.raises(ValueError, match="read-only"):
        grid.membership[1][0, 0] = True
