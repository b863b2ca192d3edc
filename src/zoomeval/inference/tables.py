"""The prediction file's layout, and writing and merging its tables (shards and the final files)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval.core.io import write_parquet
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid

#: Version of the prediction Parquet layout (columns below and the ``zoomeval`` metadata keys).
#: 2: the job also writes the aggregates file.
SCHEMA_VERSION = 2

BASE_FIELDS = [
    pa.field("image_id", pa.dictionary(pa.int32(), pa.string())),
    pa.field("scale", pa.int16()),
    pa.field("row", pa.int8()),
    pa.field("col", pa.int8()),
    pa.field("pred", pa.int16()),
    pa.field("pred_full", pa.int16()),
    pa.field("conf", pa.float32()),
]
TOP5_FIELDS = [pa.field("top5", pa.list_(pa.int16(), 5)), pa.field("top5_logit", pa.list_(pa.float32(), 5))]
declare("predictions", BASE_FIELDS + TOP5_FIELDS, SCHEMA_VERSION)
#: Float columns compress far better split into byte streams than dictionary-encoded.
FLOAT_COLUMNS = ["conf", "top5_logit", "conf_max", "conf_mean"]


def prediction_schema(top5: bool) -> pa.Schema:
    """The prediction file's columns, with ``top5`` and ``top5_logit`` if ``top5`` (``store_top5``)."""
    return pa.schema(BASE_FIELDS + (TOP5_FIELDS if top5 else []))


def prediction_table(records: Sequence[Record], grid: ZoomGrid, columns: dict[str, np.ndarray]) -> pa.Table:
    """One row per (image, transform), images in ``records`` order, then transforms in the ``grid``'s order;
    ``columns`` are ``(n_images, n_transforms, ...)`` arrays."""
    order = grid.transforms
    n_t, n_i = len(order), len(records)
    data: dict[str, Any] = {
        "image_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(n_i, dtype=np.int32), n_t)), pa.array([r.image_id for r in records])
        ),
        "scale": np.tile(np.array([t.scale for t in order], np.int16), n_i),
        "row": np.tile(np.array([t.row for t in order], np.int8), n_i),
        "col": np.tile(np.array([t.col for t in order], np.int8), n_i),
        "pred": columns["pred"].ravel(),
        "pred_full": columns["pred_full"].ravel(),
        "conf": columns["conf"].ravel(),
    }
    return pa.table({**data, **top5_columns(columns)}, schema=prediction_schema("top5" in columns))


def top5_columns(columns: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """The optional top-5 columns (``store_top5``) of :meth:`Classifier.columns` output, as Arrow arrays."""
    if "top5" not in columns:
        return {}
    names = ("top5", "top5_logit")
    return {name: pa.FixedSizeListArray.from_arrays(pa.array(columns[name].ravel()), 5) for name in names}


def write_table(path: str | os.PathLike[str], table: pa.Table, metadata: dict[str, Any]) -> None:
    """Write a predictions or aggregates table (a shard or a final file) with its metadata."""
    floats = [c for c in FLOAT_COLUMNS if c in table.column_names]
    write_parquet(
        path,
        table,
        metadata,
        use_dictionary=[c for c in table.column_names if c not in floats],
        use_byte_stream_split=floats,
    )


def merge(paths: Iterable[Path]) -> pa.Table:
    """Concatenate shards, with one dictionary for ``image_id``."""
    table = pa.concat_tables(pq.read_table(p) for p in paths)
    return table.set_column(0, "image_id", table["image_id"].cast(pa.string()).combine_chunks().dictionary_encode())
