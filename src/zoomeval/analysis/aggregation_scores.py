"""Top-1 accuracy of the aggregation methods (one prediction per image from a group of views, as in the
aggregation table of Taesiri et al. 2023) over a dataset's records, from a prediction file's aggregates."""

from __future__ import annotations

import polars as pl

from zoomeval.core.manifest import Record


def aggregation_accuracy(aggregates: pl.DataFrame, records: list[Record]) -> dict[str, dict[str, float]]:
    """Top-1 accuracy (%) of each aggregation method (:mod:`zoomeval.inference.aggregation`) over ``records``, by the
    ``max`` and the ``mean`` rule; correct means the prediction is one of the image's labels."""
    ids = pl.DataFrame({"image_id": [r.image_id for r in records]}, schema={"image_id": pl.String})
    rows = aggregates.with_columns(pl.col("image_id", "method").cast(pl.String)).join(ids, on="image_id", how="semi")
    labels = pl.DataFrame(
        {"image_id": [r.image_id for r in records], "label": [r.labels for r in records]},
        schema={"image_id": pl.String, "label": pl.List(pl.Int16)},
    )
    scored = rows.join(labels, on="image_id").select(
        "method",
        pl.col("label").list.contains(pl.col("pred_max")).alias("max"),
        pl.col("label").list.contains(pl.col("pred_mean")).alias("mean"),
    )
    out: dict[str, dict[str, float]] = {}
    for method, group in scored.group_by("method", maintain_order=True):
        if group.height != len(records):
            raise ValueError(f"aggregates have {group.height} rows for {method[0]!r}, expected {len(records)}")
        out[str(method[0])] = {rule: 100 * float(group[rule].mean()) for rule in ("max", "mean")}
    return out
