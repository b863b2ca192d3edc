"""Dataset adapters: each turns a source into a manifest (see :mod:`zoomeval.manifest`).

* ``demo``: the embedded demo scenes, generated offline (:mod:`zoomeval.demo`);
* ``imagefolder``: a folder with one sub-folder per ImageNet wnid (torchvision ``ImageFolder`` layout),
  images in sorted path order; no boxes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from zoomeval.classes import wnid_to_index
from zoomeval.manifest import Record

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}


def build_records(name: str, entry: dict[str, Any], out_dir: Path) -> list[Record]:
    """Records of dataset ``name``; generated files (if any) go under ``out_dir``."""
    adapter = entry["adapter"]
    if adapter == "demo":
        from zoomeval.demo import build_demo

        return build_demo(out_dir / "images")
    if adapter == "imagefolder":
        return imagefolder(Path(entry["root"]))
    raise ValueError(f"dataset {name!r}: unknown adapter {adapter!r}")


def imagefolder(root: Path) -> list[Record]:
    if not root.is_dir():
        raise FileNotFoundError(f"dataset folder {root} does not exist; set datasets.<name>.root in the config")
    records = []
    for class_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        label = wnid_to_index(class_dir.name)
        for path in sorted(p for p in class_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES):
            with Image.open(path) as img:  # reads the header only
                width, height = img.size
            records.append(
                Record(
                    image_id=str(path.relative_to(root).with_suffix("")),
                    path=str(path.resolve()),
                    labels=[label],
                    wnids=[class_dir.name],
                    width=width,
                    height=height,
                    origin=root.name,
                )
            )
    if not records:
        raise ValueError(f"no images under {root} (expected sub-folders named by ImageNet wnid)")
    return records


def class_indices(policy: str, records: list[Record], classes: list[int] | None = None) -> list[int] | None:
    """The dataset's class set for ``pred``: ``None`` for all 1000 classes (policy ``full``), else the
    adapter's ``classes`` or, without them, the sorted labels that occur in the dataset (policy
    ``subset``, the paper's protocol for IN-A, IN-R and ObjectNet)."""
    if policy == "full":
        return None
    return sorted(classes) if classes else sorted({label for r in records for label in r.labels})
