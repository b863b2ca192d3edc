"""ImageNet-1k class indices, WordNet ids and names, read from the class-info files that timm ships, as timm's own
``ImageNetInfo`` reads them, but without importing timm (and torch with it): a dataset's manifest job, which needs
the wnids, would otherwise spend most of its time on that import."""

from __future__ import annotations

import csv
import importlib.util
from functools import cache
from pathlib import Path

NUM_CLASSES = 1000


@cache
def _lines(name: str) -> tuple[str, ...]:
    return tuple(timm_info(name).read_text(encoding="utf-8").splitlines())


@cache
def wnids() -> tuple[str, ...]:
    """The 1000 wnids in index order (sorted, as torchvision's ImageFolder sorts them)."""
    return _lines("imagenet_synsets.txt")


@cache
def _lemmas() -> dict[str, str]:
    return dict(csv.reader(_lines("imagenet_synset_to_lemma.txt"), delimiter="\t"))


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
    """The English name of class ``index`` (its WordNet lemmas, as timm's ``index_to_description`` gives them)."""
    return _lemmas()[wnids()[index]]


def timm_info(name: str) -> Path:
    """A class-info file that timm ships in ``timm/data/_info``, found without importing timm."""
    spec = importlib.util.find_spec("timm")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(folders[0] if folders else ".") / "data" / "_info" / name
    if not path.is_file():
        raise FileNotFoundError(f"timm/data/_info/{name} is missing; the pinned timm version ships it")
    return path
