"""Datasets: each adapter turns its inputs into a manifest (see :mod:`zoomeval.core.manifest`).

* ``demo``: the embedded demo scenes, generated offline (:mod:`zoomeval.datasets.demo`);
* ``imagefolder``: a folder with one sub-folder per ImageNet wnid (torchvision ``ImageFolder`` layout),
  images in sorted path order; no boxes;
* the published formats of ImageNet val, ImageNet-A/-R/-Sketch/-V2, ObjectNet and ImageNet-Hard
  (:mod:`zoomeval.datasets.adapters`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoomeval.core.manifest import Record

#: The config inputs each adapter reads (optional ones in the second set).
ADAPTER_INPUTS: dict[str, tuple[set[str], set[str]]] = {
    "demo": (set(), set()),
    "imagefolder": ({"root"}, set()),
    "imagenet_val": ({"images", "annotations"}, {"real"}),
    "imagenet_a": ({"root"}, set()),
    "imagenet_r": ({"root"}, set()),
    "imagenet_sketch": ({"root"}, set()),
    "imagenet_v2": ({"root"}, set()),
    "objectnet": ({"root"}, set()),
    "imagenet_hard": ({"parquet"}, set()),
}
#: Passwords that publishers give out with their encrypted zips; a dataset's ``password`` key overrides them.
PUBLISHED_PASSWORDS = {"objectnet": "objectnetisatestset"}


def build_records(
    name: str, entry: dict[str, Any], out_dir: Path, resources: Path
) -> tuple[list[Record], list[int] | None]:
    """Records and class set of dataset ``name``. Generated files go under ``out_dir``; downloads and
    extracted archives under ``resources``."""
    adapter = entry["adapter"]
    if adapter not in ADAPTER_INPUTS:
        raise ValueError(f"dataset {name!r}: unknown adapter {adapter!r}")
    if adapter == "demo":
        from zoomeval.datasets.demo import build_demo

        return build_demo(out_dir / "images", entry.get("scenes", "standard")), None
    from zoomeval.datasets import adapters
    from zoomeval.datasets.sources import resolve

    required, optional = ADAPTER_INPUTS[adapter]
    password = entry.get("password", PUBLISHED_PASSWORDS.get(adapter))
    paths = {}
    for key in required | optional:
        if entry.get(key):
            where = f"datasets.{name}"
            paths[key] = resolve(entry[key], resources, key=f"{where}.{key}", password=password,
                                 password_key=f"{where}.password")  # fmt: skip
    if adapter == "imagefolder":
        return imagefolder(paths["root"]), None
    if adapter == "imagenet_val":
        return adapters.imagenet_val(paths["images"], paths["annotations"], paths.get("real"))
    if adapter == "imagenet_hard":
        files = sorted(paths["parquet"].rglob("*.parquet")) if paths["parquet"].is_dir() else [paths["parquet"]]
        return adapters.imagenet_hard(files, out_dir / "images")
    by_root = {"imagenet_a": adapters.imagenet_a, "imagenet_r": adapters.imagenet_r,
               "imagenet_sketch": adapters.imagenet_sketch, "imagenet_v2": adapters.imagenet_v2,
               "objectnet": adapters.objectnet}  # fmt: skip
    return by_root[adapter](paths["root"])


def imagefolder(root: Path) -> list[Record]:
    """A torchvision ImageFolder layout: one sub-folder per wnid, scored over all 1000 classes."""
    from zoomeval.datasets.adapters import wnid_folders

    return wnid_folders(root, None, root.name)[0]


def class_indices(policy: str, records: list[Record], classes: list[int] | None = None) -> list[int] | None:
    """The dataset's class set for ``pred``: ``None`` for all 1000 classes (policy ``full``), else the
    adapter's ``classes`` or, without them, the sorted labels that occur in the dataset (policy
    ``subset``, the paper's protocol for IN-A, IN-R and ObjectNet)."""
    if policy == "full":
        return None
    return sorted(classes) if classes else sorted({label for r in records for label in r.labels})
