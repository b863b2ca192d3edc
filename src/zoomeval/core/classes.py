"""ImageNet-1k class indices and WordNet ids, from the class info that timm ships (imported on first use, so
that reading a config or building the workflow's DAG does not import timm and torch)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from timm.data import ImageNetInfo

NUM_CLASSES = 1000


@cache
def _info() -> ImageNetInfo:
    from timm.data import ImageNetInfo

    return ImageNetInfo()


@cache
def wnids() -> tuple[str, ...]:
    """The 1000 wnids in index order (sorted, as torchvision's ImageFolder sorts them)."""
    return tuple(_info().label_names())


@cache
def _wnid_indices() -> dict[str, int]:
    return {wnid: index for index, wnid in enumerate(wnids())}


def wnid_index(wnid: str, source: object) -> int:
    """The ImageNet-1k index of ``wnid``; ``ValueError`` naming ``source`` (a file or folder) if it has none."""
    try:
        return _wnid_indices()[wnid]
    except KeyError:
        raise ValueError(f"{source}: {wnid!r} is not an ImageNet-1k wnid") from None


def wnids_of(labels: list[int]) -> list[str]:
    return [wnids()[label] for label in labels]


def description(index: int) -> str:
    return str(_info().index_to_description(index))


def timm_info(name: str) -> Traversable:
    """A class-info file that timm ships in ``timm/data/_info``."""
    path = resources.files("timm.data") / "_info" / name
    if not path.is_file():
        raise FileNotFoundError(f"timm/data/_info/{name} is missing; the pinned timm version ships it")
    return path
