"""Label sets: which labels count as correct when a dataset's predictions are scored.

Each label set is registered once with what it needs from the manifest (a :class:`~zoomeval.core.manifest.Record`
field its adapter must fill, e.g. ``real_labels``) and how it relabels the records; its scored name (the
``dataset`` column of Table A8 and the ``{scored}`` of the analysis paths) derives from its name. The paper's
IN / ReaL / IN+ReaL columns are ``in``, ``real`` and ``in_real``.

A new label set is one module that calls :func:`register`, e.g. Shankar et al.'s multi-label annotations: its
adapter stores the downloaded labels in a record field, the label set declares that field in ``needs`` and
relabels from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from zoomeval.core.config import scored_name as core_scored_name
from zoomeval.core.registry import Registry

if TYPE_CHECKING:  # kept out at run time: the DAG imports this module and must not pay for pyarrow
    from zoomeval.core.manifest import Record

Relabel = Callable[["list[Record]"], "list[Record]"]


@dataclass(frozen=True)
class LabelSet:
    """A registered label set: ``relabel`` returns the records to score, with ``labels`` replaced."""

    name: str
    relabel: Relabel
    #: where the labels come from, for messages and docs
    source: str
    #: the Record field that must be filled (not None) on some record, and that the dataset's adapter declares
    #: it fills (:class:`zoomeval.datasets.registry.Adapter`); None: the dataset's own labels suffice
    needs: str | None = None


#: Every label set, by name, in registration order.
LABEL_SETS: Registry[LabelSet] = Registry("label set", LabelSet)


def register(name: str, source: str, needs: str | None = None) -> Callable[[Relabel], Relabel]:
    """Decorator: register ``relabel`` as the label set ``name``."""
    return LABEL_SETS.register(name, source=source, needs=needs)


def get(name: str) -> LabelSet:
    return LABEL_SETS.get(name)


def scored_name(dataset: str, label_set: str) -> str:
    """The ``dataset`` value of a Table A8 row: the dataset's name, suffixed ``_<label set>`` unless ``in``."""
    get(label_set)  # refuses an unknown label set
    return core_scored_name(dataset, label_set)


def relabel(records: list[Record], label_set: str) -> list[Record]:
    """The records to score under ``label_set``; refuses a dataset whose records lack what it needs."""
    entry = get(label_set)
    if entry.needs and all(getattr(r, entry.needs) is None for r in records):
        raise ValueError(f"label set {label_set!r} needs {entry.source}, which this dataset does not have")
    return entry.relabel(records)


@register("in", "the dataset's own labels")
def own_labels(records: list[Record]) -> list[Record]:
    """The dataset's own labels."""
    return records


@register("real", "ImageNet-ReaL labels", needs="real_labels")
def real_labels(records: list[Record]) -> list[Record]:
    """ImageNet-ReaL's labels; images whose ReaL list is empty are left out."""
    return [replace(r, labels=list(r.real_labels)) for r in records if r.real_labels]


@register("in_real", "ImageNet-ReaL labels", needs="real_labels")
def own_or_real_labels(records: list[Record]) -> list[Record]:
    """Either: over all images, an image without ReaL labels counts its own label only."""
    return [replace(r, labels=sorted(set(r.labels) | set(r.real_labels or []))) for r in records]
