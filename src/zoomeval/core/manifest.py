"""The dataset manifest: one row per image with its labels, size and object boxes.

Boxes are ``[xmin, ymin, xmax, ymax]`` in pixels of the image as evaluated (after ``border`` is
cropped), 0-based and half-open (the box covers columns ``xmin .. xmax-1``). Adapters convert their
source format to this convention.

``real_labels`` holds ImageNet-ReaL labels where the dataset has them (``None``: no ReaL information;
``[]``: ReaL found no valid label, so the image is left out of ReaL scoring). ``border`` is the number
of pixels cropped from every side at decode time (ObjectNet's 2-px red frame); ``width``/``height``
are the size after that crop. ``sha256`` is the sha256 of the image file's bytes, read when the manifest is built
(:func:`zoomeval.core.images.screen`): an audit finds the image by it (``""`` in manifests older than schema 3).
The manifest's metadata may list ``classes``, the dataset's class set
(ImageNet-1k indices) used by ``class_set: subset``. ``source`` (not stored in the manifest) says where an
image written out by an adapter came from, e.g. an ImageNet-Hard Parquet shard and row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval import __version__
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.layout import declare

#: 3: ``sha256`` per image; the metadata's ``revisions`` (the hub commits of the inputs read from a hub).
SCHEMA_VERSION = 3

SCHEMA = pa.schema(
    [
        ("image_id", pa.string()),
        ("path", pa.string()),
        ("labels", pa.list_(pa.int16())),
        ("wnids", pa.list_(pa.string())),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("boxes", pa.list_(pa.list_(pa.int32(), 4))),
        ("origin", pa.string()),
        ("real_labels", pa.list_(pa.int16())),
        ("border", pa.int16()),
        ("sha256", pa.string()),
    ]
)
declare("manifest", SCHEMA, SCHEMA_VERSION)

Box = tuple[int, int, int, int]


@dataclass
class Record:
    """One image of a dataset."""

    image_id: str
    path: str
    labels: list[int]
    wnids: list[str]
    width: int
    height: int
    boxes: list[Box] = field(default_factory=list)
    origin: str = ""
    real_labels: list[int] | None = None
    border: int = 0
    sha256: str = ""
    source: str = ""


def write_manifest(
    path: str | os.PathLike[str],
    records: list[Record],
    dataset: str,
    classes: list[int] | None = None,
    n_excluded: int = 0,
    revisions: dict[str, str] | None = None,
) -> None:
    """Write the manifest; ``classes`` is the dataset's class set (``None``: the labels that occur),
    ``n_excluded`` the number of bad images left out (listed in ``bad_images.csv``) and ``revisions`` the resolved
    hub commit of each input read from a hub (input key -> ``owner/name@commit``; None: no such input)."""
    paths: dict[str, list[str]] = {}
    for r in records:
        paths.setdefault(r.image_id, []).append(r.path)
    if clashes := {image_id: p for image_id, p in paths.items() if len(p) > 1}:
        shown = "; ".join(f"{image_id!r}: {', '.join(p)}" for image_id, p in list(clashes.items())[:5])
        raise ValueError(
            f"dataset {dataset!r}: {len(clashes)} image id(s) name more than one file (an id is the path without "
            f"its suffix, so a.jpg and a.png clash): {shown}; rename or remove all but one file of each"
        )
    columns = {name: [getattr(r, name) for r in records] for name in SCHEMA.names}
    columns["boxes"] = [[list(b) for b in r.boxes] for r in records]
    table = pa.table(columns, schema=SCHEMA)
    meta = {"kind": "manifest", "schema_version": SCHEMA_VERSION, "dataset": dataset, "zoomeval": __version__}
    write_parquet(path, table, {**meta, "classes": classes, "n_excluded": n_excluded, "revisions": revisions})


def read_manifest(path: str | os.PathLike[str]) -> list[Record]:
    rows = pq.read_table(path).to_pylist()
    return [Record(**{**row, "boxes": [tuple(b) for b in row["boxes"]]}) for row in rows]


def read_classes(path: str | os.PathLike[str]) -> list[int] | None:
    """The class set recorded in a manifest's metadata (``None`` if the adapter gave none)."""
    return read_metadata(path).get("classes")


def read_revisions(path: str | os.PathLike[str]) -> dict[str, str] | None:
    """The hub revisions recorded in a manifest's metadata (``None``: no input was read from a hub)."""
    return read_metadata(path).get("revisions")
