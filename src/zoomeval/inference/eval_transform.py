"""A model's evaluation transform, as its library publishes it, for the standard evaluation
(:mod:`zoomeval.inference.standard_eval`): geometric steps on the decoded PIL image (run in DataLoader workers),
then normalisation (run on the device, as in the zoom grid). Each model source gives its own (``evaluation`` in
:mod:`zoomeval.inference.models`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image
from torchvision import transforms as T


@dataclass(frozen=True)
class EvalTransform:
    """Geometric steps on a PIL image, then normalisation with ``mean``/``std``."""

    geometry: Callable[[Image.Image], Image.Image]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    #: the library's own description of the whole transform, for the metadata
    description: str
    #: img_size, crop_pct and interpolation as the library states them (timm's data config); None: read off the steps
    settings: dict[str, Any] | None = None

    def crop_settings(self) -> dict[str, Any] | None:
        """timm's results-CSV columns of this transform (:func:`geometry_settings` unless the library states them)."""
        return self.settings or geometry_settings(self.geometry)


def split_normalize(transform: T.Compose, source: str) -> EvalTransform:
    """Split a library's evaluation ``Compose`` into its geometric steps (everything before the to-tensor step)
    and its final ``Normalize``; refuse any other layout."""
    steps = list(transform.transforms)
    names = [type(step).__name__ for step in steps]
    if len(steps) < 2 or names[-2] not in ("ToTensor", "MaybeToTensor") or not isinstance(steps[-1], T.Normalize):
        raise ValueError(f"{source}'s evaluation transform is {names}; expected ..., ToTensor, Normalize")
    norm = steps[-1]
    return EvalTransform(
        T.Compose(steps[:-2]),
        tuple(float(v) for v in torch.as_tensor(norm.mean)),
        tuple(float(v) for v in torch.as_tensor(norm.std)),
        repr(transform),
    )


def geometry_settings(geometry: Callable[[Image.Image], Image.Image]) -> dict[str, Any] | None:
    """timm's results-CSV columns of a Resize + CenterCrop evaluation: ``img_size`` (the crop), ``crop_pct`` (crop
    over the resized shorter side) and ``interpolation``; None for any other layout (nothing to report truly)."""
    steps = list(getattr(geometry, "transforms", ()))
    if [type(step).__name__ for step in steps] != ["Resize", "CenterCrop"]:
        return None
    resize, crop = steps
    sizes = [resize.size] if isinstance(resize.size, int) else list(resize.size)
    crops = [crop.size] if isinstance(crop.size, int) else list(crop.size)
    if len(sizes) != 1 or len(set(crops)) != 1:
        return None
    crop_pct = round(crops[0] / sizes[0], 4)
    return {"img_size": crops[0], "crop_pct": crop_pct, "interpolation": resize.interpolation.value}
