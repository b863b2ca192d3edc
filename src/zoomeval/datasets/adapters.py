"""Adapters for the real evaluation datasets (see :mod:`zoomeval.core.manifest` for the record format).

Each adapter reads files that are already downloaded and extracted and returns ``(records, classes)``: the
records in a deterministic order and the dataset's class set as ImageNet-1k indices (``None``: all 1000).
Image sizes come from the file headers; no image is decoded. Hidden files and folders (names starting with
``.``, such as ``.ipynb_checkpoints/`` or macOS' ``._*`` files) are ignored.

* :func:`imagenet_val`: the ILSVRC2012 validation set with its boxes and ImageNet-ReaL labels;
* :func:`wnid_folders` (:func:`imagenet_a`, :func:`imagenet_r`, :func:`imagenet_sketch`): one folder per wnid;
* :func:`imagenet_v2`: one folder per class index;
* :func:`objectnet`: ObjectNet 1.0 with its mapping files, restricted to the classes that ImageNet-1k has;
* :func:`imagenet_hard`: the Hugging Face Parquet shards of ImageNet-Hard, whose images are written out.

Images that cannot be read are not refused here: they get size 0 x 0 (or, from Parquet, a ``.bin`` file) and the
manifest step applies ``on_bad_image`` to them (:func:`zoomeval.core.images.screen`).
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from zoomeval.core.classes import description, wnids
from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Box, Record

Adapted = tuple[list[Record], list[int] | None]

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png"})
VAL_STEM = re.compile(r"ILSVRC2012_val_(\d{8})")
WNID = re.compile(r"n\d{8}")
VAL_IMAGES = 50_000
NUM_CLASSES = 1000
# PIL calls some camera JPEGs "MPO"; other formats are written with their PIL name as the file extension.
JPEG_FORMATS = frozenset({"JPEG", "MPO"})
HARD_COLUMNS = ["image", "label", "origin"]
HARD_BATCH_ROWS = 64
# A Hugging Face shard name: <split>-<index>-of-<count>[-<hash>].parquet, e.g. validation-00000-of-00009-5f63....parquet
HF_SHARD = re.compile(r"(?P<split>.+?)-(?P<index>\d{5})-of-(?P<count>\d{5})(?:-[0-9a-f]+)?\.parquet")


# ---------------------------------------------------------------------------------------------------- shared helpers


def _require_dir(path: Path, expected: str) -> None:
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; expected {expected}")


def _require_file(path: Path, expected: str) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; expected {expected}")


def _hidden(path: Path, root: Path) -> bool:
    """Whether ``path`` or a folder between ``root`` and it is hidden (its name starts with ``.``)."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _subdirs(root: Path) -> list[Path]:
    """The sub-folders of ``root``, sorted; loose files (READMEs) and hidden folders are ignored."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not _hidden(p, root))


def _files(folder: Path, pattern: str) -> list[Path]:
    """The files under ``folder`` (recursively) whose name matches ``pattern``, sorted, hidden ones left out."""
    return sorted(p for p in folder.rglob(pattern) if p.is_file() and not _hidden(p, folder))


def _image_files(folder: Path) -> list[Path]:
    return [p for p in _files(folder, "*") if p.suffix.lower() in IMAGE_SUFFIXES]


def _header(source: Path | IO[bytes]) -> tuple[str, int, int] | None:
    """The image's format, width and height from its header; None when even the header is unreadable (empty or
    broken data, a decompression bomb), so that the manifest step can list the image as bad instead of failing."""
    try:
        with Image.open(source) as img:  # reads the header only
            return img.format or "", *img.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def _size(path: Path) -> tuple[int, int]:
    """The image's size from its header; (0, 0) when it is unreadable (see :func:`_header`)."""
    header = _header(path)
    return (0, 0) if header is None else header[1:]


def _relative_id(root: Path, path: Path) -> str:
    return path.relative_to(root).with_suffix("").as_posix()


@cache
def _all_wnids() -> tuple[str, ...]:
    """The 1000 wnids, built once: adapters look them up for every image."""
    return tuple(wnids())


@cache
def _wnid_indices() -> dict[str, int]:
    return {wnid: index for index, wnid in enumerate(_all_wnids())}


def _wnid_index(wnid: str, source: Path) -> int:
    try:
        return _wnid_indices()[wnid]
    except KeyError:
        raise ValueError(f"{source}: {wnid!r} is not an ImageNet-1k wnid") from None


def _wnids_of(labels: list[int]) -> list[str]:
    return [_all_wnids()[label] for label in labels]


def _timm_info(name: str) -> Traversable:
    """A class-info file that timm ships in ``timm/data/_info``."""
    path = resources.files("timm.data") / "_info" / name
    if not path.is_file():
        raise FileNotFoundError(f"timm/data/_info/{name} is missing; the pinned timm version ships it")
    return path


def _read_json(path: Path, expected: str) -> Any:
    _require_file(path, expected)
    return json.loads(path.read_text())


def _plain_record(root: Path, path: Path, labels: list[int], origin: str, border: int = 0) -> Record:
    width, height = _size(path)
    if (width, height) == (0, 0):
        border = 0  # unreadable: screened out later
    width, height = width - 2 * border, height - 2 * border
    if width < 0 or height < 0 or (border and (width == 0 or height == 0)):
        raise ValueError(f"{path} is too small to crop a {border}-px border from every side")
    return Record(
        image_id=_relative_id(root, path),
        path=str(path.resolve()),
        labels=labels,
        wnids=_wnids_of(labels),
        width=width,
        height=height,
        origin=origin,
        border=border,
    )


# ------------------------------------------------------------------------------------------------ ImageNet validation


@dataclass(frozen=True)
class _Annotation:
    """The objects of one validation image as the source gives them: wnid and PASCAL VOC box."""

    objects: list[tuple[str, Box]]
    size: tuple[int, int] | None  # the annotated image size (XML only), checked against the image file


def imagenet_val(images: Path, annotations: Path, real: Path | None = None) -> Adapted:
    """The ILSVRC2012 validation images, labelled by the wnid of their annotated objects.

    ``images`` holds the ``ILSVRC2012_val_XXXXXXXX.JPEG`` files, flat or in wnid sub-folders. ``annotations`` is
    either the folder of bounding-box XMLs of ``ILSVRC2012_bbox_val_v3.tgz`` or Kaggle's ``LOC_val_solution.csv``
    (``ImageId,PredictionString``, the string repeating ``wnid xmin ymin xmax ymax``); both give the same records.

    Box convention: the source coordinates are read as PASCAL VOC, 1-based with ``xmax``/``ymax`` inclusive, and
    become 0-based half-open ``[xmin - 1, ymin - 1, xmax, ymax]`` clipped to the image; a VOC box with
    ``xmin=1, xmax=10`` covers columns 0..9 and becomes ``0, 10``.

    ``real`` is ImageNet-ReaL's ``real.json`` (entry ``i`` belongs to ``ILSVRC2012_val_{i+1:08d}``); without it,
    the copy that timm ships is used. Every record gets ``real_labels`` (``[]``: ReaL found no valid label).
    """
    _require_dir(images, "the folder of ILSVRC2012 validation JPEGs")
    if annotations.is_dir():
        by_image = _voc_annotations(annotations)
    else:
        _require_file(annotations, "a folder of ILSVRC2012 bbox val XMLs or LOC_val_solution.csv")
        by_image = _loc_annotations(annotations)
    real_labels = _real_labels(real)
    paths = sorted((p for p in _image_files(images) if VAL_STEM.fullmatch(p.stem)), key=lambda p: p.stem)
    if not paths:
        raise ValueError(f"no ILSVRC2012_val_XXXXXXXX images under {images}")
    records = []
    for path in paths:
        if path.stem not in by_image:
            raise ValueError(f"{annotations} has no annotation for {path.stem} ({path})")
        records.append(_val_record(path, by_image[path.stem], real_labels))
    return records, None


def _val_record(path: Path, annotation: _Annotation, real_labels: list[list[int]]) -> Record:
    found = sorted({wnid for wnid, _ in annotation.objects})
    if len(found) != 1:
        raise ValueError(f"{path.stem}: expected the objects of one class, found {found}")
    wnid = found[0]
    # Images sorted into class folders must agree with the annotation (catches a wrong annotation source).
    if WNID.fullmatch(path.parent.name) and path.parent.name != wnid:
        raise ValueError(f"{path} lies in folder {path.parent.name} but is annotated as {wnid}")
    width, height = _size(path)
    if annotation.size is not None and (width, height) != (0, 0):
        width, height = annotation.size  # a file of another size is a bad image (zoomeval.core.images.screen)
    number = int(path.stem[-8:])  # the stem matched VAL_STEM
    return Record(
        image_id=path.stem,
        path=str(path.resolve()),
        labels=[_wnid_index(wnid, path)],
        wnids=[wnid],
        width=width,
        height=height,
        # an unreadable image (size 0 x 0) keeps no boxes: the manifest step screens it out
        boxes=[_voc_to_half_open(box, width, height, path) for _, box in annotation.objects if width],
        origin="imagenet",
        real_labels=real_labels[number - 1],
    )


def _voc_to_half_open(box: Box, width: int, height: int, source: Path) -> Box:
    xmin, ymin, xmax, ymax = box
    out = (max(xmin - 1, 0), max(ymin - 1, 0), min(xmax, width), min(ymax, height))
    if out[0] >= out[2] or out[1] >= out[3]:
        raise ValueError(f"{source}: box {list(box)} is empty inside the {width}x{height} image")
    return out


def _voc_annotations(folder: Path) -> dict[str, _Annotation]:
    files = _files(folder, "ILSVRC2012_val_*.xml")
    if not files:
        raise FileNotFoundError(f"no ILSVRC2012_val_*.xml under {folder}; expected the val/ folder of the bbox XMLs")
    return {path.stem: _voc_file(path) for path in files}


def _voc_file(path: Path) -> _Annotation:
    root = ET.parse(path).getroot()
    try:
        size = (int(root.findtext("size/width", "")), int(root.findtext("size/height", "")))
        objects = [(obj.findtext("name", ""), _voc_box(obj)) for obj in root.iter("object")]
    except ValueError:
        raise ValueError(f"{path}: expected PASCAL VOC <size> and <object><name>/<bndbox> with integers") from None
    if not objects:
        raise ValueError(f"{path} has no <object>")
    return _Annotation(objects=objects, size=size)


def _voc_box(obj: ET.Element) -> Box:
    xmin, ymin, xmax, ymax = (int(obj.findtext(f"bndbox/{key}", "")) for key in ("xmin", "ymin", "xmax", "ymax"))
    return xmin, ymin, xmax, ymax


def _loc_annotations(path: Path) -> dict[str, _Annotation]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["ImageId", "PredictionString"]:
            raise ValueError(f"{path}: expected the header ImageId,PredictionString, found {reader.fieldnames}")
        return {row["ImageId"]: _loc_row(row["PredictionString"], path, row["ImageId"]) for row in reader}


def _loc_row(text: str, path: Path, image_id: str) -> _Annotation:
    tokens = text.split()
    if not tokens or len(tokens) % 5:
        raise ValueError(f"{path}: {image_id} needs groups of 'wnid xmin ymin xmax ymax', found {text!r}")
    groups = [tokens[i : i + 5] for i in range(0, len(tokens), 5)]
    objects = [(wnid, (int(x0), int(y0), int(x1), int(y1))) for wnid, x0, y0, x1, y1 in groups]
    return _Annotation(objects=objects, size=None)


def _real_labels(real: Path | None) -> list[list[int]]:
    if real is None:
        data = json.loads(_timm_info("imagenet_real_labels.json").read_text())
        source = "timm/data/_info/imagenet_real_labels.json"
    else:
        data = _read_json(real, "ImageNet-ReaL's real.json")
        source = str(real)
    valid = (
        isinstance(data, list)
        and len(data) == VAL_IMAGES
        and all(isinstance(labels, list) and all(isinstance(x, int) for x in labels) for labels in data)
    )
    if not valid:
        raise ValueError(f"{source}: expected a list of {VAL_IMAGES} lists of ImageNet-1k indices")
    return data


# ------------------------------------------------------------------------------------ one folder per wnid or index


def wnid_folders(root: Path, synsets: list[str] | None, origin: str) -> Adapted:
    """A folder with one sub-folder of images per wnid (ImageNet-A, -R, -Sketch); ``synsets`` is the dataset's class
    set (``None``: all 1000), and every folder must belong to it. Image ids are relative paths without suffix."""
    _require_dir(root, "one sub-folder of images per ImageNet wnid")
    allowed = None if synsets is None else set(synsets)
    records = []
    for class_dir in _subdirs(root):
        if allowed is not None and class_dir.name not in allowed:
            raise ValueError(f"{class_dir}: {class_dir.name!r} is not one of the dataset's {len(allowed)} wnids")
        label = _wnid_index(class_dir.name, class_dir)
        records += [_plain_record(root, path, [label], origin) for path in _image_files(class_dir)]
    if not records:
        raise ValueError(f"no images under {root} (expected sub-folders named by ImageNet wnid)")
    classes = None if synsets is None else sorted(_wnid_index(w, root) for w in synsets)
    return records, classes


def _timm_synsets(name: str) -> list[str]:
    return _timm_info(name).read_text().split()


def imagenet_a(root: Path) -> Adapted:
    return wnid_folders(root, _timm_synsets("imagenet_a_synsets.txt"), "imagenet_a")


def imagenet_r(root: Path) -> Adapted:
    return wnid_folders(root, _timm_synsets("imagenet_r_synsets.txt"), "imagenet_r")


def imagenet_sketch(root: Path) -> Adapted:
    return wnid_folders(root, None, "imagenet_sketch")


def imagenet_v2(root: Path) -> Adapted:
    """ImageNet-V2 (any of its three variants): sub-folders ``0`` .. ``999`` named by class index."""
    _require_dir(root, "ImageNet-V2's sub-folders 0 .. 999")
    folders = _subdirs(root)
    bad = [p.name for p in folders if not (p.name.isdigit() and int(p.name) < NUM_CLASSES)]
    if bad:
        raise ValueError(f"{root}: expected sub-folders named by class index 0 .. 999, found {bad[:5]}")
    records = [
        _plain_record(root, path, [int(folder.name)], "imagenet_v2")
        for folder in sorted(folders, key=lambda p: int(p.name))
        for path in _image_files(folder)
    ]
    if not records:
        raise ValueError(f"no images under {root}")
    return records, None


# ---------------------------------------------------------------------------------------------------------- ObjectNet


def objectnet(root: Path, border: int = 2) -> Adapted:
    """ObjectNet 1.0 (``root/images/<folder>/*.png`` and ``root/mappings``), restricted to the images whose class
    maps to ImageNet-1k (113 classes). Labels are all mapped indices (a prediction is correct if it is any of them);
    ``classes`` is their union. ``border`` pixels (the red frame) are cropped from every side at decode time, so
    ``width``/``height`` are the file's size minus ``2 * border``."""
    images, mappings = root / "images", root / "mappings"
    _require_dir(images, "ObjectNet's images/<folder>/ tree")
    folder_to_class = _read_json(mappings / "folder_to_objectnet_label.json", "ObjectNet's folder -> label mapping")
    class_to_indices = _objectnet_to_indices(mappings)
    records = []
    for folder in _subdirs(images):
        if folder.name not in folder_to_class:
            raise ValueError(f"{folder}: {folder.name!r} is not in {mappings / 'folder_to_objectnet_label.json'}")
        indices = class_to_indices.get(folder_to_class[folder.name])
        if indices is None:  # no ImageNet-1k counterpart: left out without reading its images
            continue
        records += [_plain_record(images, path, list(indices), "objectnet", border) for path in _image_files(folder)]
    if not records:
        raise ValueError(f"no images of ImageNet-1k classes under {images}")
    return records, sorted({i for indices in class_to_indices.values() for i in indices})


def _objectnet_to_indices(mappings: Path) -> dict[str, list[int]]:
    """ObjectNet label -> sorted ImageNet-1k indices; labels without an ImageNet class are left out, as in
    ``objectnet_to_imagenet_1k.json`` itself (its values are ImageNet class names joined by ``"; "``)."""
    path = mappings / "objectnet_to_imagenet_1k.json"
    to_names = _read_json(path, "ObjectNet's label -> ImageNet names mapping")
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
    _require_file(labels_path, "ObjectNet's ImageNet 2012 id -> names file, one line per id")
    lines = labels_path.read_text().splitlines()
    ids_path = mappings / "pytorch_to_imagenet_2012_id.json"
    pytorch_to_id = _read_json(ids_path, "ObjectNet's pytorch index -> ImageNet 2012 id mapping")
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


# ----------------------------------------------------------------------------------------------------- ImageNet-Hard


def imagenet_hard(parquet_files: list[Path], image_dir: Path) -> Adapted:
    """ImageNet-Hard from the Hugging Face Parquet shards (``taesiri/imagenet-hard``), read in batches.

    The files must be one complete set of Hugging Face shards (``validation-00000-of-00009-<hash>.parquet`` ..
    ``validation-00008-of-00009-<hash>.parquet``) or a single Parquet file. Shards are taken in sorted path order
    and rows numbered across them. Each image's bytes are written unchanged to ``image_dir/{index:05d}{ext}``
    (``ext`` from the bytes' format, ``.bin`` when even the header is unreadable); the record's ``source`` names
    the shard and row. Labels drop the -1 padding. A row with a missing or invalid label or origin, or a shard
    that is not readable Parquet with ImageNet-Hard's columns, is refused with the shard and row named."""
    if not parquet_files:
        raise ValueError("no ImageNet-Hard Parquet shards given")
    for path in parquet_files:
        _require_file(path, "an ImageNet-Hard Parquet shard")
    _check_shard_set(parquet_files)
    image_dir.mkdir(parents=True, exist_ok=True)
    records: list[Record] = []
    for path in sorted(parquet_files):
        for k, row in enumerate(_hard_rows(path)):
            records.append(_hard_record(row, len(records), f"{path} row {k}", image_dir))
    return records, None


def _check_shard_set(paths: list[Path]) -> None:
    """Refuse anything but one Parquet file or one complete set of Hugging Face shards, naming what is wrong.

    Older revisions of ``taesiri/imagenet-hard`` hold two shard sets side by side (e.g. ``-of-00005`` and
    ``-of-00009``); taking every ``*.parquet`` of such a revision would count most images twice."""
    shards = {name: HF_SHARD.fullmatch(name) for name in sorted(p.name for p in paths)}
    unnamed = [name for name, match in shards.items() if match is None]
    if unnamed == list(shards) and len(unnamed) == 1:
        return
    fix = "keep one complete set in the folder, or pin the hf input's revision to a commit that holds one"
    if unnamed:
        raise ValueError(
            f"ImageNet-Hard: {unnamed} are not named like Hugging Face shards (<split>-00000-of-00003.parquet), so "
            f"the {len(shards)} files cannot be checked for a complete set; {fix}"
        )
    found = [(m["split"], int(m["index"]), int(m["count"])) for m in shards.values() if m]
    sets = sorted({f"{split}-*-of-{count:05d}" for split, _, count in found})
    if len(sets) > 1:
        raise ValueError(f"ImageNet-Hard: the Parquet files hold {len(sets)} shard sets, {sets}; {fix}")
    split, _, count = found[0]
    indices = [index for _, index, _ in found]
    expected = {i: f"{split}-{i:05d}-of-{count:05d}" for i in range(count)}
    problems = [
        *(f"missing {name}" for i, name in expected.items() if i not in indices),
        *(f"{name} found {indices.count(i)} times" for i, name in expected.items() if indices.count(i) > 1),
        *(f"extra {name}" for name, i in zip(shards, indices, strict=True) if i >= count),
    ]
    if problems:
        raise ValueError(f"ImageNet-Hard: the shard set {sets[0]} is not complete and unique: {problems}; {fix}")


def _hard_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of one shard, read in batches, after a check of the columns' types."""
    try:
        shard = pq.ParquetFile(path)
        _check_hard_schema(path, shard.schema_arrow)
        for batch in shard.iter_batches(batch_size=HARD_BATCH_ROWS, columns=HARD_COLUMNS):
            yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(
            f"{path} is not a readable Parquet file ({type(exc).__name__}: {' '.join(str(exc).split())}); delete it "
            "and download it again "
            "(for an hf input, delete the dataset from the Hugging Face cache, e.g. with `hf cache delete`)"
        ) from exc


def _is_image(t: pa.DataType) -> bool:
    """The Hugging Face ``Image`` feature: a struct whose ``bytes`` field is binary."""
    return pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and _is_binary(t.field("bytes").type)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_int_list(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


#: Each column's type as the Hugging Face ``datasets`` library writes it (plain or large variants).
HARD_TYPES: dict[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "image": ("a struct with binary 'bytes'", _is_image),
    "label": ("a list of integers", _is_int_list),
    "origin": ("a string", _is_string),
}


def _check_hard_schema(path: Path, schema: pa.Schema) -> None:
    missing = set(HARD_COLUMNS) - set(schema.names)
    if missing:
        raise ValueError(f"{path}: expected the columns {HARD_COLUMNS}, missing {sorted(missing)}")
    for name, (expected, fits) in HARD_TYPES.items():
        if not fits(schema.field(name).type):
            raise ValueError(
                f"{path}: column {name!r} is {schema.field(name).type}, expected {expected} as in "
                "taesiri/imagenet-hard; check that this is an ImageNet-Hard shard"
            )


def _hard_record(row: dict[str, Any], index: int, source: str, image_dir: Path) -> Record:
    labels, origin = _hard_labels(row["label"], source), row["origin"]
    if not isinstance(origin, str) or not origin:
        raise ValueError(f"{source}: origin is {origin!r}; expected the name of the source dataset (a string)")
    data = (row["image"] or {}).get("bytes") or b""
    header = _header(io.BytesIO(data))
    fmt, width, height = header if header else ("bin", 0, 0)  # unreadable: listed as bad by the manifest step
    path = image_dir / f"{index:05d}{'.jpg' if fmt in JPEG_FORMATS else f'.{fmt.lower()}'}"
    with atomic_path(path) as tmp:  # an interrupted run leaves no partial image
        tmp.write_bytes(data)
    return Record(
        image_id=f"{index:05d}",
        path=str(path.resolve()),
        labels=labels,
        wnids=_wnids_of(labels),
        width=width,
        height=height,
        origin=origin,
        source=source,
    )


def _hard_labels(value: Any, source: str) -> list[int]:
    """The ImageNet-1k indices of a row's ``label`` list, without the -1 padding."""
    labels = [label for label in value if label != -1] if isinstance(value, list) else []
    if not labels or not all(isinstance(label, int) and 0 <= label < NUM_CLASSES for label in labels):
        raise ValueError(
            f"{source}: label is {value!r}; expected a list of ImageNet-1k indices 0 .. 999 (padded with -1)"
        )
    return labels
