"""ImageNet-1k class indices and WordNet ids, from the class info that timm ships."""

from __future__ import annotations

from functools import cache

from timm.data import ImageNetInfo


@cache
def _info() -> ImageNetInfo:
    return ImageNetInfo()


def wnids() -> list[str]:
    """The 1000 wnids in index order (sorted, as torchvision's ImageFolder sorts them)."""
    return list(_info().label_names())


def description(index: int) -> str:
    return str(_info().index_to_description(index))
