"""Which images the standard evaluation (:mod:`zoomeval.inference.standard_eval`) classifies correctly."""

from __future__ import annotations

import numpy as np
import polars as pl

from zoomeval.core.manifest import Record


def standard_correct(predictions: pl.DataFrame, records: list[Record], column: str = "pred") -> np.ndarray:
    """Bool per record (in order): is its standard-evaluation ``pred`` one of its labels (``column="top5"``: is one
    of its top-5 predictions)? Every record must have exactly one prediction (the file may hold more images: a label
    set such as ReaL leaves some out)."""
    ids = pl.DataFrame(
        {"image_id": [r.image_id for r in records], "i": np.arange(len(records))},
        schema={"image_id": pl.String, "i": pl.Int64},
    )
    keyed = predictions.select(pl.col("image_id").cast(pl.String), column).join(ids, on="image_id", how="inner")
    if keyed.height != len(records) or keyed["i"].n_unique() != len(records):
        raise ValueError(
            f"standard predictions cover {keyed['i'].n_unique()} of the {len(records)} images (with {keyed.height} "
            "rows); the standard-evaluation file does not match the manifest: rerun it (--forcerun standard_eval)"
        )
    labels = pl.Series([r.labels for r in records], dtype=pl.List(pl.Int16))
    keyed = keyed.sort("i").with_columns(labels.alias("labels"))
    if column == "pred":
        return keyed.select(pl.col("labels").list.contains(pl.col("pred"))).to_series().to_numpy()
    hits = pl.col(column).cast(pl.List(pl.Int16)).list.set_intersection(pl.col("labels")).list.len() > 0
    return keyed.select(hits).to_series().to_numpy()
