"""What the dataset adapters share: finding image files, reading image headers, plain records.

Hidden files and folders (names starting with ``.``, such as ``.ipynb_checkpoints/`` or macOS' ``._*`` files) are
ignored. Image sizes come from the file headers; no image is decoded. An image whose header cannot be read gets
size 0 x 0, and the manifest step applies ``on_bad_image`` to it (:func:`zoomeval.core.images.screen`).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from PIL import Image

from zoomeval.core import io as core_io
from zoomeval.core.classes import wnids_of
from zoomeval.core.manifest import Record

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png"})


def require_dir(path: Path, expected: str) -> None:
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; expected {expected}")


def require_file(path: Path, expected: str) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; expected {expected}")


def read_json(path: Path, expected: str) -> Any:
    require_file(path, expected)
    return core_io.read_json(path)


def hidden(path: Path, root: Path) -> bool:
    """Whether ``path`` or a folder between ``root`` and it is hidden (its name starts with ``.``)."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def subdirs(root: Path) -> list[Path]:
    """The sub-folders of ``root``, sorted; loose files (READMEs) and hidden folders are ignored."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not hidden(p, root))


def files(folder: Path, pattern: str) -> list[Path]:
    """The files under ``folder`` (recursively) whose name matches ``pattern``, sorted, hidden ones left out."""
    return sorted(p for p in folder.rglob(pattern) if p.is_file() and not hidden(p, folder))


def image_files(folder: Path) -> list[Path]:
    return [p for p in files(folder, "*") if p.suffix.lower() in IMAGE_SUFFIXES]


def header(source: Path | IO[bytes]) -> tuple[str, int, int] | None:
    """The image's format, width and height from its header; None when even the header is unreadable (empty or
    broken data, a decompression bomb), so that the manifest step can list the image as bad instead of failing."""
    try:
        with Image.open(source) as img:  # reads the header only
            return img.format or "", *img.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def size(path: Path) -> tuple[int, int]:
    """The image's size from its header; (0, 0) when it is unreadable (see :func:`header`)."""
    found = header(path)
    return (0, 0) if found is None else found[1:]


def plain_record(root: Path, path: Path, labels: list[int], origin: str, border: int = 0) -> Record:
    """The record of an image file without boxes; its id is its path relative to ``root``, without the suffix.
    ``border`` pixels are cropped from every side at decode time."""
    width, height = size(path)
    if (width, height) == (0, 0):
        border = 0  # unreadable: screened out later
    width, height = width - 2 * border, height - 2 * border
    if width < 0 or height < 0 or (border and (width == 0 or height == 0)):
        raise ValueError(f"{path} is too small to crop a {border}-px border from every side")
    image_id = path.relative_to(root).with_suffix("").as_posix()
    return image_record(image_id, path, labels, (width, height), origin, border=border)


def image_record(
    image_id: str, path: Path, labels: list[int], size: tuple[int, int], origin: str, **fields: Any
) -> Record:
    """The record of the image file at ``path`` with ImageNet-1k ``labels`` (and their wnids) and ``size``."""
    width, height = size
    return Record(image_id, str(path.resolve()), labels, wnids_of(labels), width, height, origin=origin, **fields)
