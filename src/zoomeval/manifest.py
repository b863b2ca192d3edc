"""The dataset manifest: one row per image with its labels, size and object boxes.

Boxes are ``[xmin, ymin, xmax, ymax]`` in pixels of the original image, 0-based and half-open (the
box covers columns ``xmin .. xmax-1``). Adapters convert their source format to this convention.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval import __version__
from zoomeval.io import write_parquet

SCHEMA_VERSION = 1

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
    ]
)

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


def write_manifest(path: str | os.PathLike[str], records: list[Record], dataset: str) -> None:
    ids = [r.image_id for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError(f"dataset {dataset!r}: image ids are not unique")
    columns = {name: [getattr(r, name) for r in records] for name in SCHEMA.names}
    columns["boxes"] = [[list(b) for b in r.boxes] for r in records]
    table = pa.table(columns, schema=SCHEMA)
    write_parquet(
        path, table, {"kind": "manifest", "schema_version": SCHEMA_VERSION, "dataset": dataset, "zoomeval": __version__}
    )


def read_manifest(path: str | os.PathLike[str]) -> list[Record]:
    rows = pq.read_table(path).to_pylist()
    return [Record(**{**row, "boxes": [tuple(b) for b in row["boxes"]]}) for row in rows]
