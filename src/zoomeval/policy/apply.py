"""``zoomeval predict --policy FILE IMAGES...``: an exported zoom policy (:mod:`zoomeval.policy.fitted`)
applied by :class:`zoomeval.policy.tta.ZoomTTA` to image files and folders, one CSV row per image."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from zoomeval.core.classes import description, wnids
from zoomeval.core.images import opened
from zoomeval.datasets.files import IMAGE_SUFFIXES, image_files
from zoomeval.policy.document import read_policy
from zoomeval.policy.tta import ZoomTTA

#: The columns of ``zoomeval predict``'s CSV: the image, its class (ImageNet-1k index, wnid and name), confidence,
#: the view that answered and the forward passes spent.
COLUMNS = ("path", "label", "wnid", "class_name", "confidence", "scale", "row", "col", "passes")
#: Images decoded and answered per call of the wrapper (a call holds each image's resized scales until it answers).
IMAGES_PER_CALL = 128


def image_paths(items: Sequence[str]) -> list[Path]:
    """Each named file, then every image file under each named folder (recursively, sorted, hidden ones left out),
    in the order given."""
    out: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            out += image_files(path)
        elif path.is_file():
            out.append(path)
        else:
            raise ValueError(f"{item}: no such file or folder")
    if not out:
        raise ValueError(f"no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) under {', '.join(items)}")
    return out


def open_image(path: Path, tta: ZoomTTA) -> Image.Image:
    """``path`` decoded as the study decodes its images (:meth:`ZoomTTA.decoded`); a file that is no such image, or
    too large for the policy's scales (checked from its header, before its pixels are read), is refused naming it."""
    try:
        with opened(path) as raw:
            image = tta.decoded(raw, str(path))
            image.load()  # while the file is open: an RGB file comes back as it was opened
            return image
    except (OSError, SyntaxError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(f"{path}: not an image this reads ({type(exc).__name__}: {exc})") from None


def policy_wrapper(
    policy: str | os.PathLike[str], resources: str | os.PathLike[str], device: str, batch_size: int
) -> ZoomTTA:
    """The wrapper of the policy file ``policy`` around its model, with the weights under ``resources`` (a study's
    resources folder), which must hold them already: a command run on new images fetches nothing."""
    from zoomeval.core.devices import resolve_device

    document = read_policy(policy)
    if batch_size < 1:
        raise ValueError(f"--batch-size: {batch_size} is no number of crops; give N >= 1")
    resolve_device(device, "--device")
    try:
        return ZoomTTA.from_file(document, resources, device, batch_size, fetch=False)
    except ValueError as exc:
        raise ValueError(
            f"{policy}: {exc} (give the study the policy came from, --study DIR, or the folder holding its "
            "weights, --resources DIR)"
        ) from None


def predict_rows(tta: ZoomTTA, paths: Sequence[Path], per_call: int = IMAGES_PER_CALL) -> Iterator[list[Any]]:
    """One row of :data:`COLUMNS` per image of ``paths``, in order, answered ``per_call`` images at a time."""
    for start in range(0, len(paths), per_call):
        part = paths[start : start + per_call]
        for path, answer in zip(part, tta([open_image(p, tta) for p in part]), strict=True):
            label = answer.label
            yield [str(path), label, wnids()[label], description(label), answer.confidence, *answer.view, answer.passes]
