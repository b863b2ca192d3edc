"""The views of the test-time methods: RandomResizedCrop's ranges, MEMO's AugMix magnitudes and fill, the standard view
and seeding."""

import math

import numpy as np
import pytest
import skimage.data
import torch
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

from zoomeval.inference.tta_views import (
    augmix_magnitude,
    augmix_op,
    make_views,
    rrc_boxes,
    standard_view,
    view_seed,
)

PHOTO = Image.fromarray(skimage.data.chelsea())  # 451 x 300


def test_rrc_boxes_stay_in_the_image_within_the_area_and_aspect_ranges_and_span_them() -> None:
    image = Image.new("RGB", (500, 375))
    torch.manual_seed(0)
    boxes = np.array(rrc_boxes(image, 3000))
    top, left, h, w = boxes.T
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= 375).all() and (left + w <= 500).all()
    area = h * w / (500 * 375)
    ratio = w / h
    # w and h are rounded to whole pixels (by at most 1/2 each): allow that on top of RandomResizedCrop's ranges
    assert (h * w >= 0.08 * 500 * 375 - (h + w) / 2).all() and (area <= 1).all()
    slack = 1 / h + 1 / w
    assert (ratio >= 3 / 4 * (1 - slack)).all() and (ratio <= 4 / 3 * (1 + slack)).all()
    assert area.min() < 0.1 and area.max() > 0.9  # the whole range is drawn
    # the aspect ratio is log-uniform: about half the boxes are wider than tall
    assert np.log(ratio).min() < math.log(0.8) and np.log(ratio).max() > math.log(1.25)
    assert 0.4 < (ratio > 1).mean() < 0.6


def test_rrc_views_are_the_boxes_resized_bicubic_without_a_flip() -> None:
    views = make_views(PHOTO, "memo_rrc", 3, 224, seed=7)
    torch.manual_seed(7)
    boxes = rrc_boxes(PHOTO, 3)
    for view, box in zip(views, boxes, strict=True):
        expected = F.to_tensor(F.resized_crop(PHOTO, *box, [224, 224], InterpolationMode.BICUBIC))
        assert torch.equal(view, expected)
    assert views.shape == (3, 3, 224, 224)


def test_views_depend_only_on_the_seed_and_leave_the_global_generator_alone() -> None:
    torch.manual_seed(123)
    before = torch.get_rng_state()
    for method in ("memo_rrc", "memo_augmix"):
        a = make_views(PHOTO, method, 4, 224, view_seed(0, "img1"))
        b = make_views(PHOTO, method, 4, 224, view_seed(0, "img1"))
        c = make_views(PHOTO, method, 4, 224, view_seed(0, "img2"))
        assert torch.equal(a, b) and not torch.equal(a, c)
        assert a.dtype == torch.float32 and 0 <= a.min() and a.max() <= 1
    assert torch.equal(torch.get_rng_state(), before)
    assert view_seed(0, "img1") != view_seed(1, "img1") and 0 <= view_seed(0, "img1") < 2**63


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        # AugMix's int_parameter(level, max) = int(level * max / 10) and float_parameter = level * max / 10
        (0.1, {"rotate": 0, "shear_x": 0.003, "translate_x": 0, "solarize": 254, "posterize": 4}),
        (0.5, {"rotate": 1, "shear_x": 0.015, "translate_x": 3, "solarize": 244, "posterize": 4}),
        (0.999, {"rotate": 2, "shear_x": 0.02997, "translate_x": 7, "solarize": 231, "posterize": 4}),
    ],
)
def test_augmix_magnitudes_are_memos_at_severity_1(level, expected) -> None:
    for op, value in expected.items():
        assert augmix_magnitude(op, level, 224) == pytest.approx(value, abs=1e-12), op


class Draws:
    """A stand-in generator that returns the given uniform draws in order."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def uniform(self, *args: float) -> float:
        return self.values.pop(0)


def test_augmix_shifts_fill_with_memos_colour_and_solarize_inverts_above_the_threshold() -> None:
    white = Image.new("RGB", (224, 224), (255, 255, 255))
    # level 0.99 -> 7 pixels; a sign draw above 0.5 makes it negative: output column x reads input column x - 7
    shifted = np.asarray(augmix_op(white, "translate_x", Draws(0.99, 0.9)))
    assert (shifted[:, :7] == (128, 0, 0)).all() and (shifted[:, 7:] == 255).all()
    grey = Image.fromarray(np.array([[[230, 240, 250]]], dtype=np.uint8))
    # level 0.5 -> threshold 244: 250 is inverted, 230 and 240 are not
    assert np.asarray(augmix_op(grey, "solarize", Draws(0.5))).tolist() == [[[230, 240, 5]]]


def test_augmix_views_differ_from_their_crop_and_stay_in_range() -> None:
    views = make_views(PHOTO, "memo_augmix", 8, 224, seed=3)
    assert views.shape == (8, 3, 224, 224)
    assert 0 <= views.min() and views.max() <= 1
    assert len({tuple(v.flatten()[:50].tolist()) for v in views}) == 8


def test_the_standard_view_is_resize_256_then_centre_crop_224_bilinear() -> None:
    view = standard_view(PHOTO)
    resized = PHOTO.resize((384, 256), Image.Resampling.BILINEAR)  # 451 x 300: int(256 * 451 / 300) = 384
    left, top = (384 - 224) // 2, (256 - 224) // 2
    expected = np.asarray(resized.crop((left, top, left + 224, top + 224)), dtype=np.float32) / 255
    np.testing.assert_array_equal(view.permute(1, 2, 0).numpy(), expected)
