"""What ``zoomeval`` exports: every name of ``__all__`` is imported on first use (``import zoomeval`` loads neither
torch nor polars) and has its entry in the generated reference page; a tensor is the image of its pixels. The API
at work on a study (the how-to's snippets, a plain module): tests/test_zoom_tta.py, which has the study."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import zoomeval
from tests.conftest import ROOT
from zoomeval.policy.tta import as_image


def test_importing_zoomeval_loads_neither_torch_nor_polars_until_a_name_is_used():
    code = "import sys, zoomeval; print('torch' in sys.modules or 'polars' in sys.modules); zoomeval.ZoomTTA"
    code += "; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["False", "True"]


def test_every_exported_name_resolves_and_is_in_the_reference_page():
    page = (ROOT / "docs" / "reference" / "api.md").read_text()
    for name in zoomeval.__all__:
        assert getattr(zoomeval, name) is not None
        assert name == "__version__" or f"## `zoomeval.{name}`" in page, name
    assert zoomeval.load_policy.__name__ == "read_policy" and zoomeval.Answer._fields[0] == "label"
    with pytest.raises(AttributeError, match="has no attribute 'read_policy'"):
        zoomeval.read_policy  # noqa: B018  (only the public names)


@pytest.mark.parametrize("channels, mode", [(1, "L"), (2, "LA"), (3, "RGB"), (4, "RGBA")])
def test_a_uint8_chw_tensor_is_the_image_of_its_pixels(channels, mode):
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, channels), dtype=np.uint8)
    image = as_image(torch.from_numpy(pixels).permute(2, 0, 1), "image 0")
    assert image.mode == mode and image.size == (7, 5)
    assert np.array_equal(np.asarray(image).reshape(5, 7, channels), pixels)
    assert as_image(same := Image.new("RGB", (2, 2)), "x") is same


@pytest.mark.parametrize(
    "image, what",
    [
        (torch.zeros(3, 4, 4), "a torch.float32 tensor of shape (3, 4, 4)"),
        (torch.zeros(8, 8, 3, dtype=torch.uint8), "a torch.uint8 tensor of shape (8, 8, 3)"),  # H, W, C
        (torch.zeros(4, 4, dtype=torch.uint8), "a torch.uint8 tensor of shape (4, 4)"),
        (np.zeros((4, 4, 3), np.uint8), "a ndarray"),
    ],
)
def test_anything_else_is_refused_naming_it(image, what):
    with pytest.raises(ValueError) as refused:
        as_image(image, "image 2")
    assert str(refused.value) == f"image 2 is {what}; expected a PIL image or a torch.uint8 tensor (C, H, W), C 1 to 4"
