"""Shankar et al.'s multi-label annotations of ImageNet val and ImageNet-V2 ("Evaluating Machine Accuracy on
ImageNet", ICML 2020) and the ImageNet-M slice (Vasudevan et al., "When does dough become a bagel?", NeurIPS
2022), read from the published ``human_accuracy_v3.0.0.json``.

The file's shape, as the public loaders read it (TensorFlow Datasets' ``imagenet2012_multilabel``, the Shift
Happens ImageNet-M task): ``initial_annots`` maps an image name to ``{"correct": [wnid, ...], "wrong": [...],
"unclear": [...]}`` (a key is absent when its list is empty); ``problematic_images`` maps the names of images the
reviewers flagged to a metadata object (only the names are used); ``imagenet_m`` lists the ImageNet-M names.
Other top-level keys are ignored. ImageNet val images are named ``ILSVRC2012_val_XXXXXXXX.JPEG``, ImageNet-V2
images by their 40-hex-digit candidate id (the stem of the published ``<class>/<id>.jpeg`` files).

:func:`read_annotations` checks the whole file and refuses, naming the key, anything of another shape;
:func:`dataset_labels` matches a dataset's images to it and counts how many are annotated.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoomeval.core.config import Config, ConfigError, DatasetConfig
from zoomeval.core.layout import declare

#: The adapters whose image ids can be matched to the annotations' image names, for each label set that reads them
#: (ImageNet-M's images are ImageNet val images).
ADAPTERS = {"multilabel": ("imagenet_val", "imagenet_v2"), "imagenet_m": ("imagenet_val",)}
#: The kinds of label an annotation holds, each a list of wnids.
KINDS = ("correct", "wrong", "unclear")
VAL_NAME = re.compile(r"ILSVRC2012_val_\d{8}\.JPEG")
V2_NAME = re.compile(r"[0-9a-f]{40}")
LABELS_SCHEMA_VERSION = 1
#: The labels file of a dataset, under ``results/labels/<dataset>/``.
LABELS_FILE = "multilabel.parquet"
declare("labels", schema_version=LABELS_SCHEMA_VERSION)


@dataclass(frozen=True)
class MultiLabels:
    """One image's annotation: ImageNet-1k indices judged correct, wrong or unclear, and its flags."""

    correct: tuple[int, ...]
    wrong: tuple[int, ...]
    unclear: tuple[int, ...]
    problematic: bool
    imagenet_m: bool


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


def read_annotations(path: str | os.PathLike[str]) -> dict[str, MultiLabels]:
    """Every annotated image of the published file, by its name there; refuses a file of another shape."""
    from zoomeval.core.classes import wnids

    where = str(path)
    try:
        document = json.loads(Path(path).read_bytes())
    except ValueError as exc:
        raise ValueError(f"{where}: not a JSON document ({exc}); download human_accuracy_v3.0.0.json again") from None
    if not isinstance(document, dict):
        raise ValueError(
            f"{where}: the document is {_type(document)}, expected an object with initial_annots, "
            "problematic_images and imagenet_m"
        )
    for key, kind in (("initial_annots", dict), ("problematic_images", dict), ("imagenet_m", list)):
        if key not in document:
            raise ValueError(f"{where}: no key {key!r}; is this Shankar et al.'s human_accuracy_v3.0.0.json?")
        if not isinstance(document[key], kind):
            raise ValueError(f"{where}: {key} is {_type(document[key])}, expected {_type(kind())}")
    index = {wnid: i for i, wnid in enumerate(wnids())}
    annotations, problematic = document["initial_annots"], document["problematic_images"]
    unknown_names = [n for n in annotations if not (VAL_NAME.fullmatch(n) or V2_NAME.fullmatch(n))]
    if unknown_names:
        raise ValueError(
            f"{where}: initial_annots has {len(unknown_names)} image name(s) that are neither ImageNet val "
            f"(ILSVRC2012_val_XXXXXXXX.JPEG) nor ImageNet-V2 (40 hex digits) names, e.g. {unknown_names[:5]}; "
            "zoomeval cannot tell which images they are"
        )
    imagenet_m = set()
    for i, name in enumerate(document["imagenet_m"]):
        if name not in annotations:
            raise ValueError(f"{where}: imagenet_m[{i}] ({name!r}) is not an image of initial_annots")
        imagenet_m.add(name)
    out = {}
    for name, entry in annotations.items():
        key = f"initial_annots[{name!r}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: {key} is {_type(entry)}, expected an object with lists {', '.join(KINDS)}")
        if extra := sorted(set(entry) - set(KINDS)):
            raise ValueError(f"{where}: {key} has key(s) {extra}; expected only {', '.join(KINDS)}")
        lists = {}
        for kind in KINDS:
            value = entry.get(kind, [])
            if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
                raise ValueError(f"{where}: {key}[{kind!r}] is {_type(value)}, expected a list of wnids")
            if unknown := [w for w in value if w not in index]:
                raise ValueError(f"{where}: {key}[{kind!r}] names {unknown[:5]}, not ImageNet-1k wnids")
            lists[kind] = tuple(sorted({index[w] for w in value}))
        out[name] = MultiLabels(**lists, problematic=name in problematic, imagenet_m=name in imagenet_m)
    return out


def annotation_name(adapter: str, image_id: str) -> str:
    """The name under which the annotations know a dataset image: ``ILSVRC2012_val_XXXXXXXX.JPEG`` for an ImageNet
    val id (the file stem), the candidate id for an ImageNet-V2 id ``<class index>/<candidate id>``."""
    if adapter == "imagenet_val":
        return f"{image_id}.JPEG"
    if adapter == "imagenet_v2":
        return image_id.rsplit("/", 1)[-1]
    raise ValueError(f"adapter {adapter!r} has no multi-label annotations; only {', '.join(ADAPTERS['multilabel'])} do")


@dataclass(frozen=True)
class Coverage:
    """How many of a dataset's images the annotations cover."""

    n_images: int
    #: images with an annotation, of which problematic (left out of multi-label accuracy) and in ImageNet-M
    n_annotated: int
    n_problematic: int
    n_imagenet_m: int


def dataset_labels(
    annotations: dict[str, MultiLabels], image_ids: list[str], adapter: str, dataset: str
) -> tuple[dict[str, MultiLabels], Coverage]:
    """The annotations of a dataset's images (by image id, in manifest order) and their coverage; refuses a dataset
    none of whose images is annotated."""
    labels = {}
    for image_id in image_ids:
        if (found := annotations.get(annotation_name(adapter, image_id))) is not None:
            labels[image_id] = found
    coverage = Coverage(
        n_images=len(image_ids),
        n_annotated=len(labels),
        n_problematic=sum(m.problematic for m in labels.values()),
        n_imagenet_m=sum(m.imagenet_m for m in labels.values()),
    )
    if not labels:
        shape = "ILSVRC2012_val_XXXXXXXX" if adapter == "imagenet_val" else "<class index>/<40 hex digits>"
        raise ValueError(
            f"dataset {dataset!r}: none of its {len(image_ids)} images (ids such as {image_ids[:3]}) is annotated; "
            f"the annotations name {adapter} images by ids of the form {shape}. Remove multilabel and imagenet_m "
            f"from datasets.{dataset}.label_sets, or point the dataset at the published images"
        )
    return labels, coverage


def write_dataset_labels(
    path: str | os.PathLike[str], labels: dict[str, MultiLabels], coverage: Coverage, dataset: str, source_sha256: str
) -> None:
    """``results/labels/<dataset>/multilabel.parquet``: one row per annotated image, coverage in the metadata."""
    import pyarrow as pa

    from zoomeval import __version__
    from zoomeval.core.io import write_parquet

    index_list = pa.list_(pa.int16())
    table = pa.table(
        {
            "image_id": pa.array(list(labels), pa.string()),
            **{kind: pa.array([list(getattr(m, kind)) for m in labels.values()], index_list) for kind in KINDS},
            "problematic": pa.array([m.problematic for m in labels.values()], pa.bool_()),
            "imagenet_m": pa.array([m.imagenet_m for m in labels.values()], pa.bool_()),
        }
    )
    meta = {
        "kind": "multilabel_labels",
        "schema_version": LABELS_SCHEMA_VERSION,
        "zoomeval": __version__,
        "dataset": dataset,
        "annotations_sha256": source_sha256,
        **vars(coverage),
    }
    write_parquet(path, table, meta)


def read_dataset_labels(path: str | os.PathLike[str]) -> dict[str, MultiLabels]:
    """The labels written by :func:`write_dataset_labels`, by image id."""
    import pyarrow.parquet as pq

    from zoomeval.core.io import read_metadata

    meta = read_metadata(path)
    if meta.get("kind") != "multilabel_labels" or meta.get("schema_version") != LABELS_SCHEMA_VERSION:
        raise ValueError(f"{path}: not a version {LABELS_SCHEMA_VERSION} multilabel labels file; re-run its rule")
    return {
        row["image_id"]: MultiLabels(*(tuple(row[k]) for k in KINDS), row["problematic"], row["imagenet_m"])
        for row in pq.read_table(path).to_pylist()
    }


def read_coverage(path: str | os.PathLike[str]) -> Coverage:
    from zoomeval.core.io import read_metadata

    meta = read_metadata(path)
    return Coverage(**{k: meta[k] for k in Coverage.__dataclass_fields__})


def uses_annotations(config: Config) -> bool:
    """Whether a dataset of ``config`` is scored with a label set that reads the annotations."""
    return any(label_set in ADAPTERS for dataset in config.datasets.values() for label_set in dataset.label_sets)


def check_dataset(config: Config, dataset: DatasetConfig, index: int, check_paths: bool) -> None:
    """The config checks of a dataset whose ``label_sets[index]`` is ``multilabel`` or ``imagenet_m`` (the label sets'
    ``check``, see :mod:`zoomeval.analysis.label_sets`)."""
    from zoomeval.core.validate import check_local_input
    from zoomeval.core.zoom import ONE_CROP

    label_set, key = dataset.label_sets[index], f"datasets.{dataset.name}"
    if dataset.adapter not in ADAPTERS[label_set]:
        raise ConfigError(
            f"{key}.label_sets[{index}]: {label_set} needs Shankar et al.'s annotations, which exist for the "
            f"images of adapter(s) {', '.join(ADAPTERS[label_set])} only, not {dataset.adapter!r}; remove {label_set}"
        )
    if dataset.class_set != "full":
        raise ConfigError(
            f"{key}.class_set: label set {label_set} needs class_set: full (the annotations "
            "name any of the 1000 classes)"
        )
    if label_set == "multilabel" and "original" not in dataset.variants:
        raise ConfigError(f"{key}.variants: the multi-label table reads the original images; add original")
    if label_set == "multilabel" and ONE_CROP[0] not in config.scales:
        raise ConfigError(
            f"scales: the multi-label table of {key} compares 1-crop accuracies (S = "
            f"{ONE_CROP[0]}, centre anchor); add {ONE_CROP[0]} to the scales"
        )
    if check_paths:
        check_local_input("multilabel", config.multilabel)
