"""Label sets: which labels count as correct when a dataset's predictions are scored.

Each label set is registered once with what it needs from the manifest (a :class:`~zoomeval.core.manifest.Record`
field its adapter must fill, e.g. ``real_labels``) and how it relabels the records; its scored name (the
``dataset`` column of Table A8 and the ``{scored}`` of the analysis paths) derives from its name. The paper's
IN / ReaL / IN+ReaL columns are ``in``, ``real`` and ``in_real``.

A label set reads either a record field its adapter fills (``needs``) or a labels file of its own beside the
manifest (``labels_file``, under ``results/labels/<dataset>/``): Shankar et al.'s multi-label annotations
(``multilabel``, ``imagenet_m``; :mod:`zoomeval.datasets.multilabel`). A label set may also declare ``check``, the
config checks of a dataset that uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from zoomeval.core.config import scored_name as core_scored_name
from zoomeval.core.layout import OUTPUTS
from zoomeval.core.left_out import LeftOut, left_out
from zoomeval.core.registry import Registry
from zoomeval.datasets import multilabel

if TYPE_CHECKING:  # kept out at run time: the DAG imports this module and must not pay for pyarrow
    from zoomeval.core.manifest import Record

#: ``relabel(records)``, or ``relabel(records, labels_path)`` for a label set with a ``labels_file``
Relabel = Callable[..., "list[Record]"]


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
    #: the file under ``results/labels/<dataset>/`` that ``relabel`` reads (its path is the second argument)
    labels_file: str | None = None
    #: ``check(config, dataset, index, check_paths)``: the config checks of a dataset whose ``label_sets[index]``
    #: is this one (raising :class:`zoomeval.core.config.ConfigError`)
    check: Callable[..., None] | None = None
    #: why an image of the manifest is not scored, for the tables' left-out columns (empty: every image is)
    unscored: str = ""


#: Every label set, by name, in registration order.
LABEL_SETS: Registry[LabelSet] = Registry("label set", LabelSet)


def register(name: str, source: str, **declared: object) -> Callable[[Relabel], Relabel]:
    """Decorator: register ``relabel`` as the label set ``name`` (``declared``: the other fields of LabelSet)."""
    return LABEL_SETS.register(name, source=source, **declared)


def get(name: str) -> LabelSet:
    return LABEL_SETS.get(name)


def scored_name(dataset: str, label_set: str) -> str:
    """The ``dataset`` value of a Table A8 row: the dataset's name, suffixed ``_<label set>`` unless ``in``."""
    get(label_set)  # refuses an unknown label set
    return core_scored_name(dataset, label_set)


def left_out_of(dataset: str, bad: Mapping[str, int], records: Sized, scored: Sized, label_set: str) -> LeftOut:
    """What a row of ``dataset`` under ``label_set`` leaves out: the manifest's bad images (``bad``, by kind) and
    the ``records`` that :func:`relabel` left out of ``scored``."""
    return left_out(dataset, bad, len(records), len(scored), get(label_set).unscored)


def relabel(records: list[Record], label_set: str, labels_path: str | os.PathLike[str] | None = None) -> list[Record]:
    """The records to score under ``label_set``; refuses a dataset whose records lack what it needs, and a label set
    that leaves no image to score (an accuracy over no images would print as 0). ``labels_path`` is the label
    set's ``labels_file`` for this dataset."""
    entry = get(label_set)
    if entry.needs and all(getattr(r, entry.needs) is None for r in records):
        raise ValueError(f"label set {label_set!r} needs {entry.source}, which this dataset does not have")
    if entry.labels_file and labels_path is None:
        where = OUTPUTS["labels"].template.format(dataset="<dataset>", labels_file=entry.labels_file)
        raise ValueError(
            f"label set {label_set!r} reads {entry.source} from {where} under the results root; give its path"
        )
    scored = entry.relabel(records, labels_path) if entry.labels_file else entry.relabel(records)
    if records and not scored:
        raise ValueError(
            f"label set {label_set!r} leaves none of the dataset's {len(records)} images to score; "
            "remove it from the dataset's label_sets"
        )
    return scored


@register("in", "the dataset's own labels")
def own_labels(records: list[Record]) -> list[Record]:
    """The dataset's own labels."""
    return records


@register("real", "ImageNet-ReaL labels", needs="real_labels", unscored="no ReaL label")
def real_labels(records: list[Record]) -> list[Record]:
    """ImageNet-ReaL's labels; images whose ReaL list is empty are left out."""
    return [replace(r, labels=list(r.real_labels)) for r in records if r.real_labels]


@register("in_real", "ImageNet-ReaL labels", needs="real_labels")
def own_or_real_labels(records: list[Record]) -> list[Record]:
    """The dataset's own labels and ImageNet-ReaL's: correct if the prediction is either, over all images (an image
    without ReaL labels counts its own label only)."""
    return [replace(r, labels=sorted(set(r.labels) | set(r.real_labels or []))) for r in records]


SHANKAR = {
    "source": "Shankar et al.'s multi-label annotations",
    "labels_file": multilabel.LABELS_FILE,
    "check": multilabel.check_dataset,
}


@register("multilabel", **SHANKAR, unscored="not annotated by Shankar et al., or problematic")
def multilabel_correct(records: list[Record], labels_path: str | os.PathLike[str]) -> list[Record]:
    """Shankar et al. 2020: correct if the prediction is one of the labels judged correct, over the annotated images
    that are not problematic. An image whose annotation has no correct label is never correct."""
    labels = multilabel.read_dataset_labels(labels_path)
    return [
        replace(r, labels=list(labels[r.image_id].correct))
        for r in records
        if r.image_id in labels and not labels[r.image_id].problematic
    ]


@register("imagenet_m", **SHANKAR, unscored="not an ImageNet-M image")
def imagenet_m_correct_or_unclear(records: list[Record], labels_path: str | os.PathLike[str]) -> list[Record]:
    """ImageNet-M (Vasudevan et al. 2022) as TensorFlow Datasets and Shift Happens score it: correct if the
    prediction is a correct or an unclear label, over the ImageNet-M images, problematic or not."""
    labels = multilabel.read_dataset_labels(labels_path)
    return [
        replace(r, labels=sorted({*labels[r.image_id].correct, *labels[r.image_id].unclear}))
        for r in records
        if r.image_id in labels and labels[r.image_id].imagenet_m
    ]
