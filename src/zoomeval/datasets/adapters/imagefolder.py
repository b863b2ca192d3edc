"""Datasets with one sub-folder of images per ImageNet wnid: any ImageFolder tree, ImageNet-A, -R and -Sketch."""

from __future__ import annotations

from pathlib import Path

from zoomeval.core.classes import timm_info, wnid_index
from zoomeval.datasets.files import image_files, plain_record, require_dir, subdirs
from zoomeval.datasets.registry import ADAPTERS, Adapted


def wnid_folders(root: Path, synsets: list[str] | None, origin: str) -> Adapted:
    """A folder with one sub-folder of images per wnid; ``synsets`` is the dataset's class set (``None``: all
    1000), and every folder must belong to it. Image ids are relative paths without suffix."""
    require_dir(root, "one sub-folder of images per ImageNet wnid")
    allowed = None if synsets is None else set(synsets)
    records = []
    for class_dir in subdirs(root):
        if allowed is not None and class_dir.name not in allowed:
            raise ValueError(f"{class_dir}: {class_dir.name!r} is not one of the dataset's {len(allowed)} wnids")
        label = wnid_index(class_dir.name, class_dir)
        records += [plain_record(root, path, [label], origin) for path in image_files(class_dir)]
    if not records:
        raise ValueError(f"no images under {root} (expected sub-folders named by ImageNet wnid)")
    classes = None if synsets is None else sorted(wnid_index(w, root) for w in synsets)
    return records, classes


def _timm_synsets(name: str) -> list[str]:
    return timm_info(name).read_text().split()


@ADAPTERS.register("imagefolder", required=("root",))
def imagefolder(root: Path) -> Adapted:
    """A torchvision ImageFolder layout: one sub-folder per wnid, images in sorted path order, scored over all
    1000 classes."""
    return wnid_folders(root, None, root.name)


@ADAPTERS.register("imagenet_a", required=("root",), classes="the 200 wnids that timm ships for ImageNet-A")
def imagenet_a(root: Path) -> Adapted:
    return wnid_folders(root, _timm_synsets("imagenet_a_synsets.txt"), "imagenet_a")


@ADAPTERS.register("imagenet_r", required=("root",), classes="the 200 wnids that timm ships for ImageNet-R")
def imagenet_r(root: Path) -> Adapted:
    return wnid_folders(root, _timm_synsets("imagenet_r_synsets.txt"), "imagenet_r")


@ADAPTERS.register("imagenet_sketch", required=("root",))
def imagenet_sketch(root: Path) -> Adapted:
    return wnid_folders(root, None, "imagenet_sketch")
