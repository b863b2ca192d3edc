import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.test_tables import metric
from zoomeval.analysis.cover_breakdown import top_k_locations
from zoomeval.core.zoom import Transform, crop_box, resized_size, resized_sizes, transforms
from zoomeval.report.figure_data import (
    anchor_grid,
    centre_bias_grids,
    count_shares,
    scale_curves,
    upper_bounds,
    variant_accuracy,
    visibility_grid,
    visible_anchor_points,
)
from zoomeval.report.figures import (
    plot_anchor_grid,
    plot_centre_bias,
    plot_count_distributions,
    plot_scale_curves,
    plot_top_k_locations,
    plot_upper_bounds,
    plot_variant_bars,
)

# Scales deliberately not ascending: scale_curves must sort them.
ORDER = transforms([256, 64])
# image -> transforms that classify it correctly; image 4 is solved by none.
SOLVED_BY = {
    0: [Transform(64, 0, 0), Transform(256, 0, 0)],
    1: [Transform(256, 0, 0), Transform(64, 2, 2)],
    2: [Transform(256, 1, 1)],
    3: [Transform(64, 1, 2)],
    4: [],
}


def synthetic_matrix() -> np.ndarray:
    matrix = np.zeros((len(ORDER), len(SOLVED_BY)), dtype=bool)
    for image, solvers in SOLVED_BY.items():
        for t in solvers:
            matrix[ORDER.index(t), image] = True
    return matrix


def test_anchor_grid_is_the_union_over_scales_per_anchor():
    expected = np.zeros((3, 3))
    expected[0, 0] = 40.0  # images 0 and 1 (image 0 at both scales counts once)
    expected[1, 1] = 20.0  # image 2
    expected[1, 2] = 20.0  # image 3
    expected[2, 2] = 20.0  # image 1
    np.testing.assert_allclose(anchor_grid(synthetic_matrix(), ORDER), expected)


def test_anchor_grid_rejects_a_matrix_that_does_not_fit_the_order():
    with pytest.raises(ValueError, match="shape"):
        anchor_grid(np.zeros((len(ORDER) - 1, 3), dtype=bool), ORDER)


def test_scale_curves_centre_and_nine_anchor_union_per_ascending_scale():
    scales, one_crop, nine_crop = scale_curves(synthetic_matrix(), ORDER)
    assert scales == [64, 256]
    np.testing.assert_allclose(one_crop, [0.0, 20.0])  # only image 2, at the centre at S=256
    np.testing.assert_allclose(nine_crop, [60.0, 60.0])  # S=64: images 0, 1, 3; S=256: images 0, 1, 2


def test_scale_curves_needs_the_centre_anchor_at_every_scale():
    order = [t for t in ORDER if t != Transform(64, 1, 1)]
    with pytest.raises(ValueError, match=r"\[64\]"):
        scale_curves(np.ones((len(order), 2), dtype=bool), order)


COVER = [ORDER.index(t) for t in (Transform(256, 1, 1), Transform(64, 0, 0), Transform(64, 1, 1), Transform(256, 2, 0))]


def test_top_k_locations_counts_the_first_k_picks():
    counts, scales, share = top_k_locations(COVER, ORDER, k=3)
    expected = np.zeros((3, 3), dtype=np.int64)
    expected[1, 1], expected[0, 0] = 2, 1
    np.testing.assert_array_equal(counts, expected)
    assert scales == [256, 64, 64]
    assert share == pytest.approx(200 / 3)


def test_top_k_locations_with_k_beyond_the_cover_uses_the_whole_cover():
    counts, scales, share = top_k_locations(COVER, ORDER)  # k = 36 > 4 picks
    assert counts.sum() == 4 and counts[2, 0] == 1
    assert scales == [256, 64, 64, 256]
    assert share == 50.0


def test_top_k_locations_of_an_empty_cover_and_a_bad_k():
    counts, scales, share = top_k_locations([], ORDER)
    assert counts.sum() == 0 and scales == [] and math.isnan(share)
    with pytest.raises(ValueError, match="k must be"):
        top_k_locations(COVER, ORDER, k=0)


VARIANT_ROWS = [
    metric("resnet50", "imagenet", 1000, 75.7, 94.5, 96.8),
    metric("resnet50", "imagenet", 1000, 70.2, 85.0, 90.1, variant="fgset"),
    metric("resnet50", "imagenet", 1000, 30.5, 50.2, 60.4, variant="bgset"),
    metric("vit_b_32", "imagenet", 1000, 75.8, 95.0, 97.2),
    metric("vit_b_32", "imagenet", 1000, 35.0, 55.1, 65.0, variant="bgset"),  # no fgset: its bar is skipped
]
COUNTS = {"imagenet": [1, 1, 2, 3, 1], "objectnet": [0, 1, 1, 4, 6, 2]}
PLOTS: dict[str, Callable[[Path], None]] = {
    "anchor_grid": lambda p: plot_anchor_grid(anchor_grid(synthetic_matrix(), ORDER), p, "anchor grid"),
    "scale_curves": lambda p: plot_scale_curves(scale_curves(synthetic_matrix(), ORDER), p, "scale curves"),
    "top_k_locations": lambda p: plot_top_k_locations(top_k_locations(COVER, ORDER), p, "top-k locations"),
    "upper_bounds": lambda p: plot_upper_bounds(upper_bounds(VARIANT_ROWS), p, "upper bounds"),
    "variant_bars": lambda p: plot_variant_bars(variant_accuracy(VARIANT_ROWS), p, "variants"),
    "count_distributions": lambda p: plot_count_distributions(count_shares(COUNTS), p, "Objects per image"),
    "centre_bias": lambda p: plot_centre_bias(
        {"all": np.arange(9.0).reshape(3, 3), "cover": np.eye(3) * 50}, p, "centre bias"
    ),
}


@pytest.mark.parametrize("name", PLOTS)
def test_plot_writes_a_non_blank_png_with_stable_bytes(tmp_path, name):
    first, second = tmp_path / "a" / f"{name}.png", tmp_path / "b" / f"{name}.png"
    PLOTS[name](first)
    PLOTS[name](second)
    with Image.open(first) as image:
        assert image.format == "PNG"
        assert image.width > 200 and image.height > 150
        assert np.asarray(image.convert("RGB"), dtype=float).std() > 0
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name]  # no temporary file left behind


def _saturation(pixels: np.ndarray) -> np.ndarray:
    return pixels.max(axis=2) - pixels.min(axis=2)


def test_anchor_heatmap_draws_row_0_at_the_top(tmp_path):
    grid = np.full((3, 3), 50.0)
    grid[0, 0], grid[2, 0] = 100.0, 0.0  # top-left darkest green, bottom-left white
    path = tmp_path / "grid.png"
    plot_anchor_grid(grid, path, "orientation")
    pixels = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    height, width = pixels.shape[:2]
    # The left third of the figure holds the heatmap's left column but none of the colorbar, whose own
    # dark end is at its top and would make a flipped heatmap pass.
    left = _saturation(pixels[:, : width // 3])
    top, bottom = left[: height // 2].mean(), left[height // 2 :].mean()
    assert top > 2 * bottom + 10, (top, bottom)


def test_variant_accuracy_rejects_unknown_and_duplicate_variants():
    assert variant_accuracy(VARIANT_ROWS)[("resnet50", "fgset")] == 90.1
    assert ("vit_b_32", "fgset") not in variant_accuracy(VARIANT_ROWS)
    with pytest.raises(ValueError, match="unknown variant 'fg'"):
        variant_accuracy([metric("m", "d", 1000, 1.0, 1.0, 1.0, variant="fg")])
    with pytest.raises(ValueError, match="duplicate row for model 'resnet50', variant 'original'"):
        variant_accuracy(VARIANT_ROWS + VARIANT_ROWS[:1])
    with pytest.raises(ValueError, match="at least one"):
        variant_accuracy([])


def test_upper_bounds_take_the_original_images_where_there_are_any():
    bounds = upper_bounds(VARIANT_ROWS)
    assert bounds.top_k == 36
    assert bounds.lines == [("resnet50", [75.7, 94.5, 96.8]), ("vit_b_32", [75.8, 95.0, 97.2])]
    assert upper_bounds(VARIANT_ROWS[1:3]).lines == [("resnet50", [70.2, 85.0, 90.1]), ("resnet50", [30.5, 50.2, 60.4])]
    with pytest.raises(ValueError, match=r"mix top_k values \[3, 36\]"):
        upper_bounds([VARIANT_ROWS[0], replace(VARIANT_ROWS[3], top_k=3)])


def test_count_shares_by_hand():
    shares = count_shares(COUNTS)
    np.testing.assert_array_equal(shares.edges, [-0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5])
    assert list(shares.shares) == ["imagenet (n=5)", "objectnet (n=6)"]
    np.testing.assert_allclose(shares.shares["imagenet (n=5)"], [0, 0.6, 0.2, 0.2, 0, 0, 0])
    np.testing.assert_allclose(shares.shares["objectnet (n=6)"], np.array([1, 2, 1, 0, 1, 0, 1]) / 6)
    with pytest.raises(ValueError, match="at least one object count"):
        count_shares({"empty": []})


def test_centre_bias_grids_over_all_transforms_and_the_cover():
    matrix, sizes = synthetic_matrix(), np.array([[300, 300]] * len(SOLVED_BY))
    grids = centre_bias_grids(matrix, ORDER, sizes, 224, COVER)
    assert list(grids) == ["all 18 transforms", "greedy cover (4 transforms)"]
    np.testing.assert_array_equal(grids["all 18 transforms"], visibility_grid(matrix, ORDER, sizes))
    np.testing.assert_array_equal(
        grids["greedy cover (4 transforms)"], visibility_grid(matrix, ORDER, sizes, rows=COVER)
    )


def test_visible_anchor_points_against_the_scalar_geometry():
    rng = np.random.default_rng(1)
    sizes = np.column_stack([rng.integers(20, 900, 40), rng.integers(20, 900, 40)])
    sizes[:3] = [[300, 300], [640, 480], [333, 500]]
    for t in transforms([10, 128, 224, 256, 512, 1024]):
        new_w, new_h = resized_sizes(sizes[:, 0], sizes[:, 1], t.scale)
        visible = visible_anchor_points(t, sizes)
        for i, (w, h) in enumerate(sizes):
            rw, rh = resized_size(int(w), int(h), t.scale)
            assert (new_w[i], new_h[i]) == (rw, rh)
            left, top, right, bottom = crop_box(rw, rh, t.row, t.col)
            for r in range(3):
                for c in range(3):
                    x, y = (c + 0.5) * rw / 3, (r + 0.5) * rh / 3
                    assert visible[i, r, c] == (left <= x < right and top <= y < bottom), (t, w, h, r, c)


def test_visibility_grid_by_hand():
    # A 300 x 300 image, anchor points at 37.3, 112 and 186.7 px per axis after resizing to 224. The centre
    # crop at S = 224 ([-1, 223) per axis) shows all nine; at S = 1024 (points at 170.7, 512, 853.3) the
    # centre crop ([399, 623)) shows only the centre point, the top-left crop ([58, 282)) only the top-left.
    order = transforms([224, 1024])
    sizes = np.array([[300, 300]] * 3)
    matrix = np.zeros((len(order), 3), dtype=bool)
    matrix[order.index(Transform(1024, 1, 1)), 0] = True
    matrix[order.index(Transform(1024, 0, 0)), 1] = True
    matrix[order.index(Transform(224, 1, 1)), 2] = True
    third = 100 / 3
    expected = np.full((3, 3), third)  # image 2 everywhere
    expected[1, 1] += third  # image 0
    expected[0, 0] += third  # image 1
    assert np.allclose(visibility_grid(matrix, order, sizes), expected)
    centre_only = np.zeros((3, 3))
    centre_only[1, 1] = third
    assert np.allclose(visibility_grid(matrix, order, sizes, rows=[order.index(Transform(1024, 1, 1))]), centre_only)
