"""ObjectNet 1.0, restricted to the classes that ImageNet-1k has."""

from __future__ import annotations

from pathlib import Path

from zoomeval.core.classes import NUM_CLASSES, description
from zoomeval.datasets.files import image_files, plain_record, read_json, require_dir, require_file, subdirs
from zoomeval.datasets.registry import ADAPTERS, Adapted

#: The password ObjectNet's publishers give out for objectnet-1.0.zip.
PUBLISHED_PASSWORD = "objectnetisatestset"


@ADAPTERS.register(
    "objectnet",
    required=("root",),
    classes="the ImageNet-1k classes that ObjectNet's mappings name",
    password=PUBLISHED_PASSWORD,
)
def objectnet(root: Path, border: int = 2) -> Adapted:
    """ObjectNet 1.0 (``root/images/<folder>/*.png`` and ``root/mappings``), restricted to the images whose class
    maps to ImageNet-1k (113 classes). Labels are all mapped indices (a prediction is correct if it is any of them);
    ``classes`` is their union. ``border`` pixels (the red frame) are cropped from every side at decode time, so
    ``width``/``height`` are the file's size minus ``2 * border``."""
    images, mappings = root / "images", root / "mappings"
    require_dir(images, "ObjectNet's images/<folder>/ tree")
    folder_to_class = read_json(mappings / "folder_to_objectnet_label.json", "ObjectNet's folder -> label mapping")
    class_to_indices = _objectnet_to_indices(mappings)
    records = []
    for folder in subdirs(images):
        if folder.name not in folder_to_class:
            raise ValueError(f"{folder}: {folder.name!r} is not in {mappings / 'folder_to_objectnet_label.json'}")
        indices = class_to_indices.get(folder_to_class[folder.name])
        if indices is None:  # no ImageNet-1k counterpart: left out without reading its images
            continue
        records += [plain_record(images, path, list(indices), "objectnet", border) for path in image_files(folder)]
    if not records:
        raise ValueError(f"no images of ImageNet-1k classes under {images}")
    return records, sorted({i for indices in class_to_indices.values() for i in indices})


def _objectnet_to_indices(mappings: Path) -> dict[str, list[int]]:
    """ObjectNet label -> sorted ImageNet-1k indices; labels without an ImageNet class are left out, as in
    ``objectnet_to_imagenet_1k.json`` itself (its values are ImageNet class names joined by ``"; "``)."""
    path = mappings / "objectnet_to_imagenet_1k.json"
    to_names = read_json(path, "ObjectNet's label -> ImageNet names mapping")
    name_to_index = _imagenet_name_indices(mappings)
    out = {}
    for label, text in to_names.items():
        names = text.split("; ")
        unknown = [n for n in names if len(name_to_index.get(n, [])) != 1]
        if unknown:
            raise ValueError(f"{path}: {label!r} maps to names that name no single ImageNet class: {unknown}")
        out[label] = sorted(name_to_index[n][0] for n in names)
    return out


def _imagenet_name_indices(mappings: Path) -> dict[str, list[int]]:
    """ImageNet class name -> its ImageNet-1k (pytorch) indices, from ObjectNet's own files.

    As shipped with ObjectNet 1.0, line ``i`` (0-based) of ``imagenet_to_label_2012_v2`` names the class with
    ImageNet 2012 id ``i`` (the devkit's ILSVRC2012_ID minus 1: line 0 is the kit fox, ILSVRC2012_ID 1), and
    ``pytorch_to_imagenet_2012_id.json`` maps each pytorch index (string) to that 0-based id. Each resolved name
    must equal timm's description of the index, so a file with another id base fails loudly. A name can occur
    twice ("crane", the bird and the machine); looking up such a name is an error.
    """
    labels_path = mappings / "imagenet_to_label_2012_v2"
    require_file(labels_path, "ObjectNet's ImageNet 2012 id -> names file, one line per id")
    lines = labels_path.read_text().splitlines()
    ids_path = mappings / "pytorch_to_imagenet_2012_id.json"
    pytorch_to_id = read_json(ids_path, "ObjectNet's pytorch index -> ImageNet 2012 id mapping")
    id_to_pytorch = {int(id_): int(index) for index, id_ in pytorch_to_id.items()}
    if len(lines) != NUM_CLASSES or sorted(id_to_pytorch) != list(range(NUM_CLASSES)):
        raise ValueError(f"{labels_path} and {ids_path}: expected 1000 lines and a bijection onto the ids 0 .. 999")
    out: dict[str, list[int]] = {}
    for id_, line in enumerate(lines):
        name, index = line.strip(), id_to_pytorch[id_]
        if name != description(index):
            raise ValueError(
                f"{labels_path} line {id_ + 1} ({name!r}) is not ImageNet-1k class {index} ({description(index)!r}) "
                f"as {ids_path} says; expected 0-based ImageNet 2012 ids"
            )
        out.setdefault(name, []).append(index)
    return out
