"""The ILSVRC2012 validation set with its boxes and ImageNet-ReaL labels."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from zoomeval.core.classes import timm_info, wnid_index
from zoomeval.core.manifest import Box, Record
from zoomeval.datasets.files import files, image_files, read_json, require_dir, require_file, size
from zoomeval.datasets.registry import ADAPTERS, Adapted

VAL_STEM = re.compile(r"ILSVRC2012_val_(\d{8})")
WNID = re.compile(r"n\d{8}")
VAL_IMAGES = 50_000


@dataclass(frozen=True)
class _Annotation:
    """The objects of one validation image as the source gives them: wnid and PASCAL VOC box."""

    objects: list[tuple[str, Box]]
    size: tuple[int, int] | None  # the annotated image size (XML only), checked against the image file


@ADAPTERS.register(
    "imagenet_val",
    required=("images", "annotations"),
    optional=("real",),
    boxes=True,
    real_labels=True,
    most_images=lambda: VAL_IMAGES,
)
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
    require_dir(images, "the folder of ILSVRC2012 validation JPEGs")
    if annotations.is_dir():
        by_image = _voc_annotations(annotations)
    else:
        require_file(annotations, "a folder of ILSVRC2012 bbox val XMLs or LOC_val_solution.csv")
        by_image = _loc_annotations(annotations)
    real_labels = _real_labels(real)
    paths = sorted((p for p in image_files(images) if VAL_STEM.fullmatch(p.stem)), key=lambda p: p.stem)
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
    width, height = size(path)
    if annotation.size is not None and (width, height) != (0, 0):
        width, height = annotation.size  # a file of another size is a bad image (zoomeval.core.images.screen)
    number = int(path.stem[-8:])  # the stem matched VAL_STEM
    return Record(
        image_id=path.stem,
        path=str(path.resolve()),
        labels=[wnid_index(wnid, path)],
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
    xmls = files(folder, "ILSVRC2012_val_*.xml")
    if not xmls:
        raise FileNotFoundError(f"no ILSVRC2012_val_*.xml under {folder}; expected the val/ folder of the bbox XMLs")
    return {path.stem: _voc_file(path) for path in xmls}


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
        data = json.loads(timm_info("imagenet_real_labels.json").read_text())
        source = "timm/data/_info/imagenet_real_labels.json"
    else:
        data = read_json(real, "ImageNet-ReaL's real.json")
        source = str(real)
    valid = (
        isinstance(data, list)
        and len(data) == VAL_IMAGES
        and all(isinstance(labels, list) and all(isinstance(x, int) for x in labels) for labels in data)
    )
    if not valid:
        raise ValueError(f"{source}: expected a list of {VAL_IMAGES} lists of ImageNet-1k indices")
    return data
