"""The correctness matrix of one prediction file: does transform t classify image i correctly? Built from the
predictions, saved bit-packed beside the metrics so that figures need not re-read the predictions."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import Transform


def correctness_matrix(predictions: pl.DataFrame, records: list[Record], order: list[Transform]) -> np.ndarray:
    """``(len(order), len(records))`` bool matrix: does transform t classify image i correctly?

    An image with several labels is correct if the prediction is any of them. Every (image, transform)
    pair must be predicted exactly once, so that no image is dropped silently.
    """
    n_t, n_i = len(order), len(records)
    ids = pl.DataFrame({"image_id": [r.image_id for r in records], "i": np.arange(n_i, dtype=np.int64)})
    tdf = pl.DataFrame(
        {
            "scale": [t.scale for t in order],
            "row": [t.row for t in order],
            "col": [t.col for t in order],
            "t": np.arange(n_t, dtype=np.int64),
        },
        schema_overrides={"scale": pl.Int16, "row": pl.Int8, "col": pl.Int8},
    )
    preds = predictions.select("image_id", "scale", "row", "col", "pred").with_columns(
        pl.col("image_id").cast(pl.String)
    )
    keyed = preds.join(ids, on="image_id", how="inner").join(tdf, on=["scale", "row", "col"], how="inner")
    if keyed.height != n_t * n_i or keyed.select(pl.struct("t", "i").n_unique()).item() != n_t * n_i:
        raise ValueError(
            f"predictions cover {keyed.height} (image, transform) pairs of the expected {n_t} x {n_i}; "
            "the prediction file does not match the manifest or the configured scales"
        )
    labels = pl.DataFrame(
        {"image_id": [r.image_id for r in records], "pred": [r.labels for r in records]},
        schema={"image_id": pl.String, "pred": pl.List(pl.Int16)},
    ).explode("pred")
    hits = keyed.join(labels, on=["image_id", "pred"], how="semi")
    matrix = np.zeros((n_t, n_i), dtype=bool)
    matrix[hits["t"].to_numpy(), hits["i"].to_numpy()] = True
    return matrix


def write_matrix(
    path: str | os.PathLike[str], matrix: np.ndarray, order: list[Transform], records: list[Record], crop_size: int
) -> None:
    """Save a correctness matrix bit-packed (324 x 50,000 images is 2 MB) with its transform and image names,
    the images' sizes and the crop size, so that figures need not re-read the predictions or the manifest."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(
            fh,
            packed=np.packbits(matrix, axis=1),
            n_images=np.int64(matrix.shape[1]),
            transforms=np.array([[t.scale, t.row, t.col] for t in order], dtype=np.int16),
            image_ids=np.array([r.image_id for r in records], dtype=np.str_),
            sizes=np.array([[r.width, r.height] for r in records], dtype=np.int32).reshape(-1, 2),
            crop_size=np.int64(crop_size),
        )


def read_matrix(path: str | os.PathLike[str]) -> tuple[np.ndarray, list[Transform], list[str]]:
    """The matrix, transform order and image ids saved by :func:`write_matrix`."""
    with np.load(path) as data:
        matrix = np.unpackbits(data["packed"], axis=1, count=int(data["n_images"])).astype(bool)
        order = [Transform(int(s), int(r), int(c)) for s, r, c in data["transforms"]]
        return matrix, order, [str(i) for i in data["image_ids"]]


def read_geometry(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """The ``(n_images, 2)`` original (width, height) of each image and the crop size saved by
    :func:`write_matrix`."""
    with np.load(path) as data:
        return data["sizes"], int(data["crop_size"])
