"""The correctness matrix of one prediction file: does transform t classify image i correctly? Built from the
predictions, saved bit-packed beside the metrics so that figures need not re-read the predictions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import Transform, ZoomGrid

#: Prediction rows read at a time: the memory is the matrix, bit per (transform, image) twice, plus one batch.
BATCH_ROWS = 1 << 21


def correctness_matrix(
    predictions_path: str | os.PathLike[str],
    records: list[Record],
    order: list[Transform],
    batch_rows: int = BATCH_ROWS,
) -> np.ndarray:
    """``(len(order), len(records))`` bool matrix: does transform t classify image i correctly?

    An image with several labels is correct if the prediction is any of them. Rows of other images or transforms
    are ignored; every (image, transform) pair must be predicted exactly once, so that no image is dropped
    silently. The file is read ``batch_rows`` rows at a time (50,000 images x 324 transforms are 16.2 M rows).
    """
    labels = np.full((len(records), max([1, *(len(r.labels) for r in records)])), -1, dtype=np.int32)
    for i, r in enumerate(records):
        labels[i, : len(r.labels)] = r.labels
    matrix = np.zeros((len(order), len(records)), dtype=bool)
    rows = PredictionRows(predictions_path, [r.image_id for r in records], order, batch_rows)
    for t, i, values in rows.batches(["pred"]):
        matrix[t, i] = (labels[i] == values["pred"][:, None]).any(axis=1)
    return matrix


@dataclass(frozen=True)
class PredictionRows:
    """The rows of the prediction file ``path`` for the images ``image_ids`` under the transforms ``order``, read
    ``batch_rows`` rows at a time; every (image, transform) pair must be predicted exactly once."""

    path: str | os.PathLike[str]
    image_ids: list[str]
    order: list[Transform]
    batch_rows: int = BATCH_ROWS

    def columns(self, columns: list[str]) -> dict[str, np.ndarray]:
        """``(len(image_ids), len(order))`` arrays of the file's ``columns`` (e.g. ``pred``, ``conf``), read once in
        batches and checked as :func:`correctness_matrix` checks them."""
        schema = pq.read_schema(self.path)
        shape = (len(self.image_ids), len(self.order))
        out = {c: np.zeros(shape, schema.field(c).type.to_pandas_dtype()) for c in columns}
        for t, i, values in self.batches(columns):
            for c in columns:
                out[c][i, t] = values[c]
        return out

    def batches(self, columns: list[str]) -> Iterator[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]]:
        """Each batch's transform and image indices and ``columns``, for the rows of ``image_ids`` under ``order``.
        Once read, refuses a file that does not predict every (image, transform) pair."""
        n_t, n_i = len(self.order), len(self.image_ids)
        ids = pa.array(self.image_ids, pa.string())
        grid = ZoomGrid(dict.fromkeys(t.scale for t in self.order))  # the scales' grid, which ``order`` is (part of)
        slot = np.full(grid.n_transforms, -1, dtype=np.int64)  # each grid transform's position in ``order``
        slot[[grid.index(t.scale, t.row, t.col) for t in self.order]] = np.arange(n_t)
        seen, found = np.zeros((n_t, n_i), dtype=bool), 0
        names = ["image_id", "scale", "row", "col", *columns]
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.batch_rows, columns=names):
            image = _image_index(batch.column("image_id"), ids)
            at = grid.indices(*(batch.column(c).to_numpy() for c in ("scale", "row", "col")))
            position = np.where(at >= 0, slot[at], -1)
            keep = (image >= 0) & (position >= 0)
            i, t = image[keep], position[keep]
            found += int(keep.sum())
            seen[t, i] = True
            yield t, i, {c: batch.column(c).to_numpy()[keep] for c in columns}
        if found != n_t * n_i or not seen.all():
            raise ValueError(
                f"{self.path}: predictions cover {found} (image, transform) pairs of the expected {n_t} x {n_i}; "
                "the prediction file does not match the manifest or the configured scales"
            )


def _image_index(column: pa.Array, ids: pa.Array) -> np.ndarray:
    """Each row's index in ``ids`` (-1 for an image not there), decoding a dictionary column once per batch."""
    if pa.types.is_dictionary(column.type):
        return _image_index(column.dictionary, ids)[column.indices.to_numpy(zero_copy_only=False)]
    return pc.index_in(column.cast(pa.string()), value_set=ids).fill_null(-1).to_numpy(zero_copy_only=False)


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


class Correctness(NamedTuple):
    """One correctness matrix: ``matrix[t, i]`` says whether transform ``transforms[t]`` classifies image
    ``image_ids[i]`` correctly."""

    matrix: np.ndarray
    transforms: list[Transform]
    image_ids: list[str]


def read_matrix(path: str | os.PathLike[str]) -> Correctness:
    """The matrix, transform order and image ids saved by :func:`write_matrix`."""
    with np.load(path) as data:
        matrix = np.unpackbits(data["packed"], axis=1, count=int(data["n_images"])).astype(bool)
    return Correctness(matrix, *read_matrix_index(path))


def read_matrix_index(path: str | os.PathLike[str]) -> tuple[list[Transform], list[str]]:
    """The transform order and image ids saved by :func:`write_matrix`, without reading the matrix (the labels)."""
    with np.load(path) as data:
        order = [Transform(int(s), int(r), int(c)) for s, r, c in data["transforms"]]
        return order, [str(i) for i in data["image_ids"]]


def read_geometry(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """The ``(n_images, 2)`` original (width, height) of each image and the crop size saved by
    :func:`write_matrix`."""
    with np.load(path) as data:
        return data["sizes"], int(data["crop_size"])
