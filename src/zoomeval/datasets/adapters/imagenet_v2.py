"""ImageNet-V2 (any of its three variants): one sub-folder per class index."""

from __future__ import annotations

from pathlib import Path

from zoomeval.core.classes import NUM_CLASSES
from zoomeval.datasets.files import image_files, plain_record, require_dir, subdirs
from zoomeval.datasets.registry import ADAPTERS, Adapted


@ADAPTERS.register("imagenet_v2", required=("root",))
def imagenet_v2(root: Path) -> Adapted:
    """ImageNet-V2's sub-folders ``0`` .. ``999``, named by class index."""
    require_dir(root, "ImageNet-V2's sub-folders 0 .. 999")
    folders = subdirs(root)
    bad = [p.name for p in folders if not (p.name.isdigit() and int(p.name) < NUM_CLASSES)]
    if bad:
        raise ValueError(f"{root}: expected sub-folders named by class index 0 .. 999, found {bad[:5]}")
    records = [
        plain_record(root, path, [int(folder.name)], "imagenet_v2")
        for folder in sorted(folders, key=lambda p: int(p.name))
        for path in image_files(folder)
    ]
    if not records:
        raise ValueError(f"no images under {root}")
    return records, None
