"""Correctness matrix, 1-crop accuracy, upper bounds and the greedy cover of one prediction file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from zoomeval.cover import greedy_cover
from zoomeval.exact_cover import exact_cover
from zoomeval.io import atomic_path, read_metadata
from zoomeval.manifest import Record
from zoomeval.zoom import ONE_CROP, ZOOM_GROUPS, Transform, transforms


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


@dataclass
class Metrics:
    """One row of Table A8 (accuracies in percent; ``None`` where the 1-crop transform is absent)."""

    model: str
    variant: str
    dataset: str
    n_images: int
    acc_1crop: float | None
    acc_top36: float
    acc_max: float
    cover_size: int
    #: the minimum cover (HiGHS; the greedy one when the time limit leaves nothing better) and greedy - exact
    cover_size_exact: int
    cover_gap: int
    #: zoom-in/-out/-224 upper bounds within the greedy cover and exclusive shares (:func:`zoom_groups`)
    zoom_groups: dict[str, float] | None = None
    #: share (%) of the first top_k greedy picks at the centre anchor (None for an empty cover)
    top_k_centre_share: float | None = None
    #: transforms searched (9 x scales) and classes a random guess picks from (Table 1's "Random" row)
    n_transforms: int = 0
    n_classes: int = 1000
    #: images of the dataset left out as bad (listed in its bad_images.csv)
    n_excluded: int = 0
    #: per source dataset where the images come from several (ImageNet-Hard): n_images, acc_1crop, acc_max
    by_origin: dict[str, dict[str, float | int | None]] | None = None
    #: top-1 accuracy (%) per aggregation method and rule (:func:`aggregation_accuracy`)
    aggregation: dict[str, dict[str, float]] | None = None


def analyze(
    matrix: np.ndarray, order: list[Transform], top_k: int = 36, time_limit: float = 30.0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Accuracies, the greedy cover and the exact minimum cover of a correctness matrix (rows in ``order``).

    Returns the statistics and the cover document: the greedy picks in order and the exact cover's
    transforms, size, dual bound and solver status.
    """
    n_images = matrix.shape[1]
    picks = greedy_cover(matrix)
    exact = exact_cover(matrix, time_limit, greedy=[p.index for p in picks])
    one = Transform(*ONE_CROP)
    acc_1crop = 100 * float(matrix[order.index(one)].mean()) if one in order and n_images else None
    top = [p.index for p in picks[:top_k]]
    acc_top = 100 * float(matrix[top].any(axis=0).mean()) if top else 0.0
    acc_max = 100 * float(matrix.any(axis=0).mean()) if n_images else 0.0
    cover: list[dict[str, Any]] = []
    covered = 0
    for rank, p in enumerate(picks, start=1):
        covered += p.gain
        t = order[p.index]
        cover.append(
            {"rank": rank, "transform": t.name, "scale": t.scale, "row": t.row, "col": t.col,
             "gain": p.gain, "covered": covered}
        )  # fmt: skip
    stats = {"n_images": n_images, "acc_1crop": acc_1crop, "acc_top36": acc_top, "acc_max": acc_max,
             "cover_size": len(picks), "cover_size_exact": exact.size,
             "cover_gap": len(picks) - exact.size,
             "zoom_groups": zoom_groups(matrix, order, [p.index for p in picks]),
             "top_k_centre_share": _finite(top_k_locations([p.index for p in picks], order, top_k).centre_share),
             }  # fmt: skip
    document = {
        "top_k": top_k,
        "greedy": cover,
        "exact": {
            "size": exact.size,
            "status": exact.status,
            "dual_bound": exact.dual_bound,
            "reduced_rows": exact.reduced_rows,
            "seconds": round(exact.seconds, 3),
            "transforms": [order[i].name for i in exact.picks],
        },
    }
    return stats, document


class TopKLocations(NamedTuple):
    """Where the first k greedy picks sit: counts per anchor (3x3), their scales, centre share in %."""

    anchor_counts: np.ndarray
    scales: list[int]
    centre_share: float


def top_k_locations(cover: Sequence[int], order: Sequence[Transform], k: int = 36) -> TopKLocations:
    """Anchors and scales of the first ``k`` greedy picks (fewer if the cover is shorter).

    ``centre_share`` is NaN for an empty cover: a share of no picks is undefined, and NaN keeps it out of
    a silent average.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    picks = [order[i] for i in cover[:k]]
    counts = np.zeros((3, 3), dtype=np.int64)
    for t in picks:
        counts[t.row, t.col] += 1
    share = 100.0 * counts[1, 1] / len(picks) if picks else float("nan")
    return TopKLocations(counts, [t.scale for t in picks], float(share))


def _finite(value: float) -> float | None:
    """JSON has no NaN: an undefined share is stored as null."""
    return None if np.isnan(value) else value


def zoom_groups(matrix: np.ndarray, order: list[Transform], cover: list[int]) -> dict[str, float]:
    """Upper bound of each zoom group within the model's own greedy cover, and the share of all images
    that one group solves and neither other does ("exclusively solves"), in percent.

    Each classifier uses its own cover; the authors' notebook reused the last classifier's (paper.md
    section 7, pitfall 11).
    """
    n_images = matrix.shape[1]
    solved = {}
    for name, member in ZOOM_GROUPS.items():
        rows = [t for t in cover if member(order[t].scale)]
        solved[name] = matrix[rows].any(axis=0) if rows else np.zeros(n_images, bool)
    out: dict[str, float] = {}
    for name, hits in solved.items():
        others = np.logical_or.reduce([h for other, h in solved.items() if other != name])
        out[f"ub_{name}"] = 100 * float(hits.mean()) if n_images else 0.0
        out[f"excl_{name}"] = 100 * float((hits & ~others).mean()) if n_images else 0.0
    return out


def aggregation_accuracy(aggregates: pl.DataFrame, records: list[Record]) -> dict[str, dict[str, float]]:
    """Top-1 accuracy (%) of each aggregation method (:mod:`zoomeval.aggregation`) over ``records``, by the
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


#: How a dataset's images are scored: its own labels (``in``), ImageNet-ReaL's (``real``: images whose
#: ReaL list is empty are left out) or either (``in_real``: over all images; an image without ReaL labels
#: counts its own label only), as in the paper's IN / ReaL / IN+ReaL columns.
LABEL_SETS = ("in", "real", "in_real")


def relabel(records: list[Record], label_set: str) -> list[Record]:
    """The records to score under ``label_set``, with ``labels`` replaced accordingly."""
    if label_set == "in":
        return records
    if label_set not in LABEL_SETS:
        raise ValueError(f"unknown label set {label_set!r}; expected one of {LABEL_SETS}")
    if all(r.real_labels is None for r in records):
        raise ValueError(f"label set {label_set!r} needs ImageNet-ReaL labels, which this dataset does not have")
    if label_set == "real":
        return [replace(r, labels=list(r.real_labels)) for r in records if r.real_labels]
    return [replace(r, labels=sorted(set(r.labels) | set(r.real_labels or []))) for r in records]


def scored_name(dataset: str, label_set: str) -> str:
    """The ``dataset`` value of a Table A8 row: the dataset's name, suffixed for ReaL scoring."""
    return dataset if label_set == "in" else f"{dataset}_{label_set}"


def analyze_predictions(
    predictions_path: str | os.PathLike[str],
    records: list[Record],
    top_k: int = 36,
    label_set: str = "in",
    time_limit: float = 30.0,
    matrix_path: str | os.PathLike[str] | None = None,
    n_excluded: int = 0,
    aggregates_path: str | os.PathLike[str] | None = None,
) -> tuple[Metrics, dict[str, Any]]:
    """Read one prediction file and compute its Table A8 row and its cover document (see :func:`analyze`);
    with ``matrix_path``, also save the correctness matrix there; with ``aggregates_path``, add the
    aggregation methods' accuracies."""
    meta = read_metadata(predictions_path)
    order = transforms(list(meta["scales"]))
    # A subset class set counts its classes as the dataset's distinct label groups: an ObjectNet class that
    # maps to two ImageNet classes is one class to guess.
    n_classes = 1000 if meta["class_set"] == "full" else len({tuple(r.labels) for r in records})
    records = relabel(records, label_set)
    matrix = correctness_matrix(pl.read_parquet(predictions_path), records, order)
    if matrix_path is not None:
        write_matrix(matrix_path, matrix, order, records, meta["crop_size"])
    stats, cover = analyze(matrix, order, top_k, time_limit)
    origins = np.array([r.origin for r in records])
    by_origin = None
    if len(set(origins)) > 1:
        one = order.index(Transform(*ONE_CROP)) if Transform(*ONE_CROP) in order else None
        by_origin = {
            str(o): {
                "n_images": int((origins == o).sum()),
                "acc_1crop": None if one is None else 100 * float(matrix[one, origins == o].mean()),
                "acc_max": 100 * float(matrix[:, origins == o].any(axis=0).mean()),
            }
            for o in sorted(set(origins))
        }
    aggregation = None if aggregates_path is None else aggregation_accuracy(pl.read_parquet(aggregates_path), records)
    metrics = Metrics(
        model=meta["model"]["name"],
        variant=meta["variant"],
        dataset=scored_name(meta["dataset"], label_set),
        n_images=stats["n_images"],
        acc_1crop=stats["acc_1crop"],
        acc_top36=stats["acc_top36"],
        acc_max=stats["acc_max"],
        cover_size=stats["cover_size"],
        cover_size_exact=stats["cover_size_exact"],
        cover_gap=stats["cover_gap"],
        zoom_groups=stats["zoom_groups"],
        top_k_centre_share=stats["top_k_centre_share"],
        n_transforms=len(order),
        n_classes=n_classes,
        n_excluded=n_excluded,
        by_origin=by_origin,
        aggregation=aggregation,
    )
    return metrics, cover
