"""Scoring one prediction file: 1-crop accuracy, the upper bounds and the greedy and exact covers of its
correctness matrix under a label set, computed apart from saving them (:func:`write_analysis`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from zoomeval.analysis.aggregation_scores import aggregation_accuracy
from zoomeval.analysis.comparability import comparability_key, file_input, images_digest
from zoomeval.analysis.cover import Pick, greedy_cover
from zoomeval.analysis.cover_breakdown import top_k_locations, zoom_groups
from zoomeval.analysis.exact_cover import DEFAULT_LIMITS, SOLVER, CoverLimits, ExactCover, exact_cover
from zoomeval.analysis.label_sets import left_out_of, relabel, scored_name
from zoomeval.analysis.matrix import correctness_matrix, write_matrix
from zoomeval.analysis.metrics import Metrics, Scores, write_metrics
from zoomeval.analysis.standard_scores import standard_correct
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP, Transform, ZoomGrid


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyze_predictions` computes for one prediction file; :func:`write_analysis` saves it."""

    metrics: Metrics
    #: the greedy picks in order and the exact cover (see :func:`cover_document`)
    cover: dict[str, Any]
    matrix: np.ndarray
    order: list[Transform]
    #: the scored records (relabelled), in the matrix's column order
    records: list[Record]
    crop_size: int


def _percent_solved(matrix: np.ndarray, rows: list[int] | np.ndarray | slice = slice(None)) -> float:
    """% of images (columns) that at least one of ``rows`` classifies correctly; 0 for no images."""
    return 100 * float(matrix[rows].any(axis=0).mean()) if matrix.shape[1] else 0.0


def _one_crop_row(order: list[Transform]) -> int | None:
    one = Transform(*ONE_CROP)
    return order.index(one) if one in order else None


def _finite(value: float) -> float | None:
    """JSON has no NaN: an undefined share is stored as null."""
    return None if np.isnan(value) else value


def analyze(
    matrix: np.ndarray, order: list[Transform], top_k: int = 36, limits: CoverLimits = DEFAULT_LIMITS
) -> tuple[Scores, dict[str, Any]]:
    """Accuracies, the greedy cover and the exact minimum cover (within ``limits``) of a correctness matrix (rows in
    ``order``).

    Returns the scores and the cover document (:func:`cover_document`).
    """
    picks = greedy_cover(matrix)
    greedy = [p.index for p in picks]
    exact = exact_cover(matrix, limits.nodes, limits.seconds, greedy=greedy)
    scores = Scores(
        **greedy_scores(matrix, order, greedy, top_k),
        cover_size_exact=exact.size,
        cover_gap=len(picks) - exact.size,
        zoom_groups=zoom_groups(matrix, order, greedy),
        top_k_centre_share=_finite(top_k_locations(greedy, order, top_k).centre_share),
    )
    return scores, cover_document(picks, exact, order, top_k, limits)


def greedy_scores(matrix: np.ndarray, order: list[Transform], greedy: list[int], top_k: int) -> dict[str, Any]:
    """The scores that need no exact cover: images, 1-crop accuracy, the top_k and full upper bounds and the greedy
    cover's size (``greedy``: its picks, row indices in order)."""
    one = _one_crop_row(order)
    return {
        "n_images": matrix.shape[1],
        "acc_1crop": 100 * float(matrix[one].mean()) if one is not None and matrix.shape[1] else None,
        "acc_top_k": _percent_solved(matrix, greedy[:top_k]),
        "acc_max": _percent_solved(matrix),
        "cover_size": len(greedy),
    }


def cover_document(
    picks: list[Pick], exact: ExactCover, order: list[Transform], top_k: int, limits: CoverLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """The covers as saved in cover.json: the greedy picks in order with their gains, and the exact cover's
    transforms, size, dual bound, solver status, limits and nodes explored, and the solver."""
    greedy, covered = [], 0
    for rank, p in enumerate(picks, start=1):
        covered += p.gain
        t = order[p.index]
        greedy.append(
            {
                "rank": rank,
                "transform": t.name,
                "scale": t.scale,
                "row": t.row,
                "col": t.col,
                "gain": p.gain,
                "covered": covered,
            }
        )
    return {
        "top_k": top_k,
        "greedy": greedy,
        "exact": {
            "size": exact.size,
            "status": exact.status,
            "dual_bound": exact.dual_bound,
            "reduced_rows": exact.reduced_rows,
            "seconds": round(exact.seconds, 3),
            "transforms": [order[i].name for i in exact.picks],
            "node_limit": limits.nodes,
            "nodes": exact.nodes,
            "time_limit": limits.seconds,
            "solver": SOLVER,
        },
    }


def by_origin(
    matrix: np.ndarray, order: list[Transform], records: list[Record], standard: np.ndarray | None = None
) -> dict[str, dict[str, float | int | None]] | None:
    """1-crop accuracy, upper bound and standard-evaluation accuracy (``standard``: correct per record, if any) per
    source dataset, where the images come from several (ImageNet-Hard)."""
    origins = np.array([r.origin for r in records])
    if len(set(origins)) < 2:
        return None
    one = _one_crop_row(order)
    return {
        str(o): {
            "n_images": int((origins == o).sum()),
            "acc_1crop": None if one is None else 100 * float(matrix[one, origins == o].mean()),
            "acc_max": _percent_solved(matrix[:, origins == o]),
            "acc_standard": None if standard is None else 100 * float(standard[origins == o].mean()),
        }
        for o in sorted(set(origins))
    }


def n_classes(class_set: str, records: list[Record]) -> int:
    """Classes a random guess picks from. A subset class set counts the dataset's distinct label groups: an
    ObjectNet class that maps to two ImageNet classes is one class to guess."""
    return 1000 if class_set == "full" else len({tuple(r.labels) for r in records})


def analyze_predictions(
    predictions_path: str | os.PathLike[str],
    records: list[Record],
    top_k: int = 36,
    label_set: str = "in",
    limits: CoverLimits = DEFAULT_LIMITS,
    n_excluded: int = 0,
    bad: Mapping[str, int] | None = None,
    aggregates_path: str | os.PathLike[str] | None = None,
    labels_path: str | os.PathLike[str] | None = None,
    standard_path: str | os.PathLike[str] | None = None,
) -> Analysis:
    """Score one prediction file under ``label_set``: its Table A8 row, cover document and correctness matrix
    (see :func:`analyze`); with ``aggregates_path``, the aggregation methods' accuracies too, and with
    ``standard_path`` the standard evaluation's accuracy; ``limits`` bound the exact cover. ``labels_path`` is the
    label set's own labels file, for those that have one. ``n_excluded`` bad images were left out of ``records``,
    ``bad`` gives them by kind (:func:`zoomeval.core.images.bad_kinds` of the dataset's bad_images.csv). Writes
    nothing."""
    meta = read_metadata(predictions_path)
    order = list(ZoomGrid(meta["scales"]).transforms)
    classes = n_classes(meta["class_set"], records)
    scored = relabel(records, label_set, labels_path)
    if bad is None:  # kinds not given
        bad = {"unclassified": n_excluded} if n_excluded else {}
    left_out = left_out_of(meta["dataset"], bad, records, scored, label_set)
    records = scored
    matrix = correctness_matrix(predictions_path, records, order)
    scores, cover = analyze(matrix, order, top_k, limits)
    aggregates = None if aggregates_path is None else pl.read_parquet(aggregates_path)
    standard = None if standard_path is None else standard_correct(pl.read_parquet(standard_path), records)
    metrics = Metrics(
        **vars(scores),
        model=meta["model"]["name"],
        variant=meta["variant"],
        dataset=scored_name(meta["dataset"], label_set),
        n_transforms=len(order),
        n_classes=classes,
        n_excluded=n_excluded,
        by_origin=by_origin(matrix, order, records, standard),
        aggregation=None if aggregates is None else aggregation_accuracy(aggregates, records),
        top_k=top_k,
        acc_standard=None if standard is None or not len(standard) else 100 * float(standard.mean()),
        left_out=left_out,
        inputs={
            "predictions": file_input(predictions_path),
            "standard": None if standard_path is None else file_input(standard_path),
        },
        key=comparability_key(meta, images_digest(records), label_set, top_k, limits.nodes),
    )
    return Analysis(metrics, cover, matrix, order, records, meta["crop_size"])


def write_analysis(
    analysis: Analysis,
    metrics_path: str | os.PathLike[str],
    cover_path: str | os.PathLike[str],
    matrix_path: str | os.PathLike[str],
) -> None:
    """Save metrics.json, cover.json (the metrics with the covers) and the correctness matrix."""
    write_matrix(matrix_path, analysis.matrix, analysis.order, analysis.records, analysis.crop_size)
    write_metrics(analysis.metrics, analysis.cover, metrics_path, cover_path)
