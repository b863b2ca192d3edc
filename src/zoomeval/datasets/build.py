"""A dataset's records through its adapter (see :mod:`zoomeval.datasets.registry`), and its class set."""

from __future__ import annotations

from pathlib import Path

from zoomeval.core.config import DatasetConfig
from zoomeval.core.manifest import Record
from zoomeval.datasets.registry import ADAPTERS, Adapted


def build_records(dataset: DatasetConfig, inputs: dict[str, Path], image_dir: Path) -> Adapted:
    """Records and class set of ``dataset`` from its local ``inputs`` (input key -> path); an adapter that
    writes images writes them under ``image_dir``."""
    adapter = ADAPTERS.get(dataset.adapter)
    options = {key: getattr(dataset, key) for key in adapter.options}
    if adapter.images:
        options["image_dir"] = image_dir
    return adapter.build(**inputs, **options)


def most_images(dataset: DatasetConfig) -> int | None:
    """The most images ``dataset``'s adapter can give, known from its options alone (the demo's scene count), or
    None where only its inputs tell."""
    adapter = ADAPTERS.get(dataset.adapter)
    if adapter.most_images is None:
        return None
    return adapter.most_images(**{key: getattr(dataset, key) for key in adapter.options})


def first_images(records: list[Record], limit: int | None) -> list[Record]:
    """The first ``limit`` records in the adapter's (the manifest's) order, or all of them with no limit: a limited
    run (config key ``limit``) screens and evaluates only those."""
    return records if limit is None else records[:limit]


def class_indices(policy: str, records: list[Record], classes: list[int] | None = None) -> list[int] | None:
    """The dataset's class set for ``pred``: ``None`` for all 1000 classes (policy ``full``), else the
    adapter's ``classes`` or, without them, the sorted labels that occur in the dataset (policy
    ``subset``, the paper's protocol for IN-A, IN-R and ObjectNet)."""
    if policy == "full":
        return None
    return sorted(classes) if classes else sorted({label for r in records for label in r.labels})
