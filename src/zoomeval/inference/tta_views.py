"""The images MEMO sees: the standard test view and the K augmented views of each test-time adaptation method.

* ``standard_view``: Resize(256) + CenterCrop(224), bilinear (MEMO's ``te_transforms``); for another input size
  the same 7/8 crop fraction.
* ``memo_rrc`` (Taesiri et al. 2023, "a random zoom-in"): torchvision's RandomResizedCrop to the input size,
  bicubic, area fraction 0.08-1, aspect ratio 3/4-4/3, no flip.
* ``memo_augmix``: MEMO's own AugMix for ImageNet, written here from its published parameters (the authors'
  ``_augmix_aug``, the AugMix defaults of Hendrycks et al. 2020). A RandomResizedCrop to the input size (bilinear)
  and a horizontal flip with probability 1/2, then three chains of 1-3 operations drawn uniformly from 9
  (autocontrast, equalize, rotate, solarize, shear x/y, translate x/y, posterize) at severity 1, mixed with
  Dirichlet(1, 1, 1) weights and blended with the crop by a Beta(1, 1) weight, in floating point.

torchvision's ``AugMix`` is not used: its magnitudes come in 10 discrete bins and severity 1 keeps only bin 0, where
rotate, shear and translate do nothing and solarize inverts only white pixels; MEMO's severity 1 draws a continuous
level in [0.1, 1) (rotations of 0-2 degrees, shears up to 0.03, shifts up to 7 pixels, solarize thresholds
231-254), which no torchvision severity reproduces. torchvision's AugMix also rounds the mix back to uint8, fills
with black, and has no preceding crop and flip.

Every view of an image comes from a generator seeded by :func:`view_seed` (the config's seed and the image id), so
the views and hence the predictions are the same on every run, whatever was evaluated before.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image, ImageOps
from torchvision.transforms import InterpolationMode

from zoomeval.core.config import TTA_METHODS

METHODS = TTA_METHODS
#: RandomResizedCrop's ranges (torchvision's defaults, as both MEMO and the RRC variant use them).
RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)
#: MEMO's AugMix: operations, chains, severity.
AUGMIX_OPS = (
    "autocontrast",
    "equalize",
    "rotate",
    "solarize",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
    "posterize",
)
AUGMIX_WIDTH = 3
AUGMIX_DEPTHS = (1, 3)  # each chain has 1 to 3 operations
AUGMIX_SEVERITY = 1.0
#: MEMO passes ``fillcolor=128`` to PIL, which reads an integer on an RGB image as packed RGB: (128, 0, 0).
AUGMIX_FILL = (128, 0, 0)


def view_seed(seed: int, image_id: str) -> int:
    """A 63-bit seed for one image's views, from the config's ``seed`` and the image id."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{image_id}".encode()).digest()[:8], "big") >> 1


def standard_view(image: Image.Image, size: int = 224) -> torch.Tensor:
    """Resize the shorter side to ``size * 8 // 7`` (256 for 224), bilinear, then the central ``size`` square;
    (3, size, size) float in [0, 1]."""
    resized = F.resize(image, size * 8 // 7, interpolation=InterpolationMode.BILINEAR)
    return F.to_tensor(F.center_crop(resized, size))


def rrc_boxes(image: Image.Image, n: int) -> list[tuple[int, int, int, int]]:
    """``n`` RandomResizedCrop boxes ``(top, left, height, width)`` drawn from torch's global generator."""
    return [T.RandomResizedCrop.get_params(image, list(RRC_SCALE), list(RRC_RATIO)) for _ in range(n)]


def rrc_views(image: Image.Image, n: int, size: int) -> list[Image.Image]:
    """``n`` random zoom-ins: each box resized to ``size`` x ``size``, bicubic, not flipped."""
    return [F.resized_crop(image, *box, [size, size], InterpolationMode.BICUBIC) for box in rrc_boxes(image, n)]


def augmix_magnitude(op: str, level: float, size: int) -> float:
    """The magnitude MEMO's AugMix gives ``op`` at ``level`` (in [0.1, 1) at severity 1): degrees, shear factor,
    pixels, solarize threshold or posterize bits (AugMix's ``int_parameter``/``float_parameter`` over 10 levels)."""
    if op == "rotate":
        return int(level * 30 / 10)
    if op in ("shear_x", "shear_y"):
        return level * 0.3 / 10
    if op in ("translate_x", "translate_y"):
        return int(level * (size / 3) / 10)
    if op == "solarize":
        return 256 - int(level * 256 / 10)
    if op == "posterize":
        return 4 - int(level * 4 / 10)
    raise ValueError(f"AugMix operation {op!r} has no magnitude")


def augmix_op(image: Image.Image, op: str, rng: np.random.Generator) -> Image.Image:
    """Apply one AugMix operation, drawing its level and sign from ``rng`` as MEMO does."""
    if op == "autocontrast":
        return ImageOps.autocontrast(image)
    if op == "equalize":
        return ImageOps.equalize(image)
    value = augmix_magnitude(op, rng.uniform(0.1, AUGMIX_SEVERITY), image.width)
    if op == "solarize":
        return ImageOps.solarize(image, int(value))
    if op == "posterize":
        return ImageOps.posterize(image, int(value))
    if rng.uniform() > 0.5:
        value = -value
    bilinear = Image.Resampling.BILINEAR
    if op == "rotate":
        return image.rotate(value, resample=bilinear, fillcolor=AUGMIX_FILL)
    matrix = {
        "shear_x": (1, value, 0, 0, 1, 0),
        "shear_y": (1, 0, 0, value, 1, 0),
        "translate_x": (1, 0, value, 0, 1, 0),
        "translate_y": (1, 0, 0, 0, 1, value),
    }[op]
    return image.transform(image.size, Image.Transform.AFFINE, matrix, resample=bilinear, fillcolor=AUGMIX_FILL)


def augmix_view(image: Image.Image, size: int, rng: np.random.Generator) -> torch.Tensor:
    """One MEMO AugMix view, (3, size, size) float in [0, 1]. The crop and flip draw from torch's global
    generator, the rest from ``rng``. Mixing happens before normalisation, which is the same affine combination
    as MEMO's mix of normalised tensors since the weights sum to 1."""
    crop = T.RandomHorizontalFlip()(T.RandomResizedCrop(size, list(RRC_SCALE), list(RRC_RATIO))(image))
    weights = rng.dirichlet([1.0] * AUGMIX_WIDTH).astype(np.float32)
    blend = float(np.float32(rng.beta(1.0, 1.0)))
    mix = torch.zeros(3, size, size)
    for weight in weights:
        chain = crop
        for _ in range(rng.integers(AUGMIX_DEPTHS[0], AUGMIX_DEPTHS[1] + 1)):
            chain = augmix_op(chain, str(rng.choice(AUGMIX_OPS)), rng)
        mix += float(weight) * F.to_tensor(chain)
    return blend * F.to_tensor(crop) + (1 - blend) * mix


def make_views(image: Image.Image, method: str, n: int, size: int, seed: int) -> torch.Tensor:
    """``n`` views of ``image`` for a MEMO ``method``, (n, 3, size, size) float in [0, 1], drawn from generators
    seeded with ``seed`` (torch's global generator is forked, so nothing outside sees the draws)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if method == "memo_rrc":
            return torch.stack([F.to_tensor(view) for view in rrc_views(image, n, size)])
        if method == "memo_augmix":
            rng = np.random.default_rng(seed)
            return torch.stack([augmix_view(image, size, rng) for _ in range(n)])
    raise ValueError(f"unknown test-time adaptation method {method!r}; use one of {METHODS[1:]}")


def describe(method: str, size: int) -> dict[str, object]:
    """The view settings of ``method`` as recorded in the output's metadata."""
    standard = {"resize": size * 8 // 7, "crop": size, "interpolation": "bilinear"}
    crop = {"size": size, "scale": list(RRC_SCALE), "ratio": list(RRC_RATIO)}
    views: dict[str, object] = {
        "none": {},
        "memo_rrc": {"random_resized_crop": {**crop, "interpolation": "bicubic"}, "flip": False},
        "memo_augmix": {
            "random_resized_crop": {**crop, "interpolation": "bilinear"},
            "flip": 0.5,
            "ops": list(AUGMIX_OPS),
            "width": AUGMIX_WIDTH,
            "depth": list(AUGMIX_DEPTHS),
            "severity": AUGMIX_SEVERITY,
            "fill": list(AUGMIX_FILL),
            "mix": "float",
            "implementation": "zoomeval (MEMO's recipe), not torchvision",
        },
    }[method]
    return {"standard_view": standard, "view_transform": views}
