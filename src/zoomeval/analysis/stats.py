"""Objects per image: counts per dataset and Mann-Whitney U comparisons between datasets.

A dataset's object count per image comes from its boxes (``bbox``) or from SAM's automatic masks
(``sam_auto``). Two datasets are compared with the two-sided Mann-Whitney U test, reported with the
rank-biserial correlation as its effect size. Accuracies get Wilson score intervals (:func:`wilson_interval`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval import __version__
from zoomeval.core.io import read_metadata, write_csv, write_parquet
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record

COUNT_METHODS = ("bbox", "sam_auto")
OBJECT_COUNTS_SCHEMA_VERSION = 1
OBJECT_COUNTS_SCHEMA = pa.schema([("image_id", pa.string()), ("method", pa.string()), ("n_objects", pa.int16())])

MANN_WHITNEY_COLUMNS = [
    "dataset1",
    "dataset2",
    "n1",
    "n2",
    "median1",
    "median2",
    "mean1",
    "mean2",
    "U",
    "p_value",
    "rank_biserial",
]
declare("object_counts", OBJECT_COUNTS_SCHEMA, OBJECT_COUNTS_SCHEMA_VERSION)
declare("mann_whitney", MANN_WHITNEY_COLUMNS)
# Medians of integer counts are multiples of 0.5 and U a multiple of 0.5, so these formats are exact there;
# p-values span many orders of magnitude, hence significant digits rather than decimals.
_CSV_FORMATS: dict[str, Callable[[Any], str]] = {
    "median1": "{:.4f}".format,
    "median2": "{:.4f}".format,
    "mean1": "{:.4f}".format,
    "mean2": "{:.4f}".format,
    "U": "{:.1f}".format,
    "p_value": "{:.6g}".format,
    "rank_biserial": "{:.6f}".format,
}


def _sam_auto_counts(masks_path: str | os.PathLike[str]) -> dict[str, int]:
    method = read_metadata(masks_path).get("method")
    if method != "sam_auto":
        raise ValueError(f"{masks_path}: mask method is {method!r}, expected 'sam_auto'")
    table = pq.read_table(masks_path, columns=["image_id", "n_objects"])
    return dict(zip(table["image_id"].to_pylist(), table["n_objects"].to_pylist(), strict=True))


def object_counts(records: Sequence[Record], masks_path: str | os.PathLike[str] | None, method: str) -> pa.Table:
    """Objects per image, one row per record in order.

    ``bbox`` counts the record's boxes (``masks_path`` is not read); ``sam_auto`` takes ``n_objects`` from
    the SAM mask file at ``masks_path``, which must cover every record (extra images in it are ignored).
    """
    if method == "bbox":
        counts = [len(r.boxes) for r in records]
    elif method == "sam_auto":
        if masks_path is None:
            raise ValueError("method 'sam_auto' needs the SAM mask file")
        by_id = _sam_auto_counts(masks_path)
        missing = [r.image_id for r in records if r.image_id not in by_id]
        if missing:
            raise ValueError(f"{masks_path}: no mask for {len(missing)} image(s), e.g. {missing[:3]}")
        counts = [by_id[r.image_id] for r in records]
    else:
        raise ValueError(f"unknown object count method {method!r}; expected one of {COUNT_METHODS}")
    columns = {"image_id": [r.image_id for r in records], "method": [method] * len(records), "n_objects": counts}
    return pa.table(columns, schema=OBJECT_COUNTS_SCHEMA)


def write_object_counts(path: str | os.PathLike[str], table: pa.Table, dataset: str) -> None:
    """Write a table of :func:`object_counts`; its single method is recorded in the metadata."""
    methods = set(table["method"].to_pylist())
    if len(methods) != 1:
        raise ValueError(f"dataset {dataset!r}: object counts need exactly one method, found {sorted(methods)}")
    meta = {
        "kind": "object_counts",
        "schema_version": OBJECT_COUNTS_SCHEMA_VERSION,
        "dataset": dataset,
        "method": methods.pop(),
        "zoomeval": __version__,
    }
    write_parquet(path, table, meta)


def mann_whitney(a: Sequence[int | float], b: Sequence[int | float]) -> dict[str, int | float]:
    """Two-sided Mann-Whitney U test of samples ``a`` and ``b`` with summary statistics.

    ``U`` is the statistic of ``a`` (scipy's ``statistic``: pairs with ``a > b`` plus half the ties). The
    p-value uses scipy's default ``method="auto"``: the exact distribution when one sample has at most 8
    values and there are no ties, otherwise the normal approximation with tie and continuity correction.
    ``rank_biserial`` is ``2 U / (n1 n2) - 1`` in [-1, 1]: positive when ``a`` tends to be larger than
    ``b``, negative when smaller, 0 for no tendency.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    if np.isnan(x).any() or np.isnan(y).any():  # checked here as well: the all-equal shortcut would accept NaN
        raise ValueError("Mann-Whitney U samples must not contain NaN")
    n1, n2 = x.size, y.size
    if np.unique(np.concatenate([x, y])).size == 1:
        # All values equal: the normal approximation's variance is 0 and scipy only reaches p = 1 through
        # z = -inf and clipping 2 * sf to 1, so state the result (every pair is a tie) directly.
        u, p = n1 * n2 / 2, 1.0
    else:
        from scipy.stats import mannwhitneyu  # here: every table imports this module for its intervals

        result = mannwhitneyu(x, y, alternative="two-sided")
        u, p = float(result.statistic), float(result.pvalue)
    return {
        "n1": n1,
        "n2": n2,
        "median1": float(np.median(x)),
        "median2": float(np.median(y)),
        "mean1": float(x.mean()),
        "mean2": float(y.mean()),
        "U": u,
        "p_value": p,
        "rank_biserial": 2 * u / (n1 * n2) - 1,
    }


def mann_whitney_table(counts: Mapping[str, Sequence[int]], pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One :func:`mann_whitney` row per ``(dataset1, dataset2)`` pair (no multiple-testing correction)."""
    unknown = sorted({name for pair in pairs for name in pair} - counts.keys())
    if unknown:
        raise ValueError(f"no object counts for dataset(s) {unknown}")
    return [{"dataset1": d1, "dataset2": d2, **mann_whitney(counts[d1], counts[d2])} for d1, d2 in pairs]


def write_mann_whitney_csv(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write :func:`mann_whitney_table` rows as CSV with the columns of ``MANN_WHITNEY_COLUMNS``."""
    formatted = ([_CSV_FORMATS.get(c, str)(row[c]) for c in MANN_WHITNEY_COLUMNS] for row in rows)
    write_csv(path, MANN_WHITNEY_COLUMNS, formatted)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion, as fractions: ``(c - h, c + h)`` with
    ``c = (k + z²/2) / (n + z²)`` and ``h = z / (n + z²) * sqrt(k (n - k) / n + z²/4)``, ``z`` the normal quantile
    of ``(1 + confidence) / 2`` (scipy's ``binomtest(k, n).proportion_ci(method='wilson')``)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"a Wilson interval needs 0 <= successes <= n and n > 0, not {successes} of {n}")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    centre = (successes + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(successes * (n - successes) / n + z * z / 4)
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy_interval(percent: float, n: int, what: str) -> tuple[float, float]:
    """The 95 % Wilson interval, in percent, of an accuracy of ``percent`` % over ``n`` images; refused (``what``
    names it) when the percentage is no count of the images."""
    count = round(percent * n / 100)
    if n <= 0 or abs(100 * count / n - percent) > 1e-6:
        raise ValueError(f"{what} {percent} is not a count of {n} images")
    low, high = wilson_interval(count, n)
    return 100 * low, 100 * high
