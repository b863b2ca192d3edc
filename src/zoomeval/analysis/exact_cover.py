"""Exact minimum set cover over transforms: shrink the images, then solve the 0/1 program with HiGHS.

Same elements and sets as :mod:`zoomeval.analysis.cover`: element = an image that some transform classifies
correctly, set = the images one transform classifies correctly. The paper reports the greedy cover; this finds the true
minimum, or within a node limit the best cover known and a lower bound, with the greedy cover as the fallback.

The stopping rule is work, not time: HiGHS explores at most ``node_limit`` branch-and-bound nodes, on one thread, so
one matrix gives the same cover and status on any machine, however fast or loaded (HiGHS is deterministic; the same
HiGHS is assumed, which ``cover.json`` records by scipy's version). A wall-clock limit is only a safety stop: when it
ends the search before the node limit, no cover is returned (:class:`CoverTimeLimit`), since its size would depend
on the machine's speed.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from math import isqrt

import numpy as np
import scipy
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from zoomeval.analysis.cover import greedy_cover
from zoomeval.core.config import COVER_NODE_LIMIT, COVER_TIME_LIMIT

#: Most (image, kept image) pairs compared in one step of the dominance test; bounds its memory to tens of MB.
_PAIR_BUDGET = 1 << 20
#: HiGHS's threads: one, as the analyze job claims one core (HiGHS's results do not depend on it).
THREADS = 1
#: The solver as cover.json records it (each scipy release ships one HiGHS): one matrix gives one cover under one.
SOLVER = f"HiGHS in scipy {scipy.__version__}"


@dataclass(frozen=True)
class CoverLimits:
    """When the exact cover's search stops: after ``nodes`` branch-and-bound nodes (``cover_node_limit``, what
    decides the result), or at ``seconds`` (``cover_time_limit``, a safety stop that gives no result; None: none)."""

    nodes: int = COVER_NODE_LIMIT
    seconds: float | None = COVER_TIME_LIMIT


#: The config's default limits.
DEFAULT_LIMITS = CoverLimits()


@dataclass(frozen=True)
class ExactCover:
    """Outcome of :func:`exact_cover`.

    ``size`` is ``len(picks)``, the smallest cover known; it is the minimum when ``status`` is ``"optimal"``.
    ``dual_bound`` is the solver's lower bound on the minimum (``None`` if it reported none); ``status`` is
    ``"optimal"``, ``"node_limit"`` (the solver's cover at its node limit, no worse than greedy, optimality not
    proven), ``"greedy_fallback"`` (the solver found nothing better than greedy) or ``"empty"`` (nothing to cover).
    ``nodes`` is the branch-and-bound nodes HiGHS explored (``None``: no search).
    """

    size: int
    dual_bound: float | None
    status: str
    picks: list[int]
    reduced_rows: int
    seconds: float
    nodes: int | None = None


class CoverTimeLimit(RuntimeError):
    """The wall-clock limit ended HiGHS's search before its node limit: a cover that would depend on the machine's
    speed, so none is given."""


def reduce_rows(matrix: np.ndarray) -> np.ndarray:
    """The ``(n_transforms, n_images)`` boolean matrix restricted to the images that constrain a cover.

    Drops images no transform covers, keeps one of each group of identical images, and drops every image whose
    set of covering transforms contains another image's (covering that one covers it too). A set of transforms
    covers the result iff it covers every coverable image of ``matrix``. Kept images stay in input order.
    """
    matrix = _as_matrix(matrix)
    return matrix[:, _essential_images(matrix)]


def exact_cover(
    matrix: np.ndarray,
    node_limit: int = COVER_NODE_LIMIT,
    time_limit: float | None = None,
    greedy: list[int] | None = None,
) -> ExactCover:
    """Minimum set of transforms (rows) covering every coverable image (column) of a boolean matrix.

    Solves ``min sum(x) s.t. A x >= 1, x binary`` on :func:`reduce_rows` with ``scipy.optimize.milp`` within
    ``node_limit`` branch-and-bound nodes; raises :class:`CoverTimeLimit` when ``time_limit`` seconds (None: no
    limit) end the search first. ``greedy`` is a known cover (by default
    :func:`zoomeval.analysis.cover.greedy_cover`'s), returned when the solver ends without a cover at least as
    small. The returned cover is checked against ``matrix``.
    """
    start = time.perf_counter()
    matrix = _as_matrix(matrix)
    reduced = reduce_rows(matrix)
    if reduced.shape[1] == 0:
        return ExactCover(0, 0.0, "empty", [], 0, time.perf_counter() - start)
    if greedy is None:
        greedy = [pick.index for pick in greedy_cover(matrix)]
    status, picks, dual_bound, nodes = _solve(reduced, node_limit, time_limit, greedy)
    _check_cover(matrix, picks)
    return ExactCover(len(picks), dual_bound, status, picks, reduced.shape[1], time.perf_counter() - start, nodes)


def _as_matrix(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=bool)
    if matrix.ndim != 2:
        raise ValueError(f"expected a (n_transforms, n_images) matrix, got shape {matrix.shape}")
    return matrix


def _essential_images(matrix: np.ndarray) -> np.ndarray:
    """Ascending indices of one image per distinct, undominated, coverable covering set."""
    sets = _pack_columns(matrix)
    coverable = np.flatnonzero(sets.any(axis=1))
    if coverable.size == 0:
        return coverable
    _, first = np.unique(sets[coverable], axis=0, return_index=True)
    distinct = coverable[first]  # return_index gives each set's first image, so the pick is deterministic
    by_size = distinct[np.argsort(np.bitwise_count(sets[distinct]).sum(axis=1), kind="stable")]
    return np.sort(by_size[_minimal(sets[by_size])])


def _pack_columns(matrix: np.ndarray) -> np.ndarray:
    """Each image's covering set as a row of ``uint64`` words, one bit per transform."""
    n_transforms, n_images = matrix.shape
    padded = np.zeros((-(-n_transforms // 64) * 64, n_images), dtype=bool)
    padded[:n_transforms] = matrix
    return np.ascontiguousarray(np.packbits(padded, axis=0).T).view(np.uint64)


def _minimal(sets: np.ndarray) -> np.ndarray:
    """Mask of the rows with no strict subset among ``sets`` (distinct bitsets, popcount ascending).

    A set can only contain sets no larger than itself, so one pass in popcount order that compares each chunk with
    the sets kept so far, then its survivors with each other, finds them all.
    """
    keep = np.zeros(len(sets), dtype=bool)
    kept = np.empty_like(sets)
    n_kept = 0
    start = 0
    while start < len(sets):
        stop = start + max(1, min(isqrt(_PAIR_BUDGET), _PAIR_BUDGET // max(n_kept, 1)))
        chunk = np.arange(start, min(stop, len(sets)))
        chunk = chunk[~_contains_any(sets[chunk], kept[:n_kept])]
        # A survivor containing another survivor is dominated even if that one is dominated too (transitivity).
        chunk = chunk[~_contains_any(sets[chunk], sets[chunk], skip_self=True)]
        kept[n_kept : n_kept + chunk.size] = sets[chunk]
        n_kept += chunk.size
        keep[chunk] = True
        start = stop
    return keep


def _contains_any(sets: np.ndarray, pool: np.ndarray, skip_self: bool = False) -> np.ndarray:
    """Mask over ``sets``: does the row contain some row of ``pool`` (``b & ~a == 0`` in every word)?

    Tests word by word on the surviving pairs only: the first word usually rules out almost every pair.
    """
    i, j = np.nonzero((pool[None, :, 0] & ~sets[:, None, 0]) == 0)
    if skip_self:
        i, j = i[i != j], j[i != j]
    for word in range(1, sets.shape[1]):
        inside = (pool[j, word] & ~sets[i, word]) == 0
        i, j = i[inside], j[inside]
    contains = np.zeros(len(sets), dtype=bool)
    contains[i] = True
    return contains


def _solve(
    reduced: np.ndarray, node_limit: int, time_limit: float | None, greedy: list[int]
) -> tuple[str, list[int], float | None, int | None]:
    """Status, sorted picks, dual bound and nodes of the 0/1 program on ``reduced``, falling back to ``greedy``."""
    n_transforms, n_rows = reduced.shape
    rows, cols = np.nonzero(reduced.T)
    a = csr_array((np.ones(rows.size), (rows, cols)), shape=(n_rows, n_transforms))
    options = {"node_limit": node_limit, "presolve": True, "threads": THREADS}
    if time_limit is not None:
        options["time_limit"] = time_limit
    with warnings.catch_warnings():  # milp passes the options it does not name (threads) to HiGHS, and says so
        warnings.filterwarnings("ignore", re.escape("Unrecognized options detected: {'threads'}"), RuntimeWarning)
        res = milp(
            np.ones(n_transforms),
            integrality=np.ones(n_transforms),
            bounds=Bounds(0, 1),
            constraints=LinearConstraint(a, lb=1),
            options=options,
        )
    bound = getattr(res, "mip_dual_bound", None)
    dual_bound = float(bound) if bound is not None and np.isfinite(bound) else None
    nodes = getattr(res, "mip_node_count", None)
    picks = [] if res.x is None else np.flatnonzero(res.x > 0.5).tolist()
    if res.status == 0:
        return "optimal", picks, dual_bound, nodes
    at_limit = nodes is not None and nodes >= node_limit  # HiGHS's "solution limit" status, which milp leaves unnamed
    if not at_limit and res.status == 1:  # milp's status for a time (or iteration) limit; no iteration limit is set
        explored = "" if nodes is None else f" after {nodes} nodes"
        raise CoverTimeLimit(
            f"the exact cover's search reached cover_time_limit ({time_limit} s){explored}, before its "
            f"cover_node_limit ({node_limit}), so its result would depend on this machine's speed: raise "
            "cover_time_limit, or lower cover_node_limit"
        )
    if at_limit and res.x is not None and len(picks) <= len(greedy):  # keep its incumbent if greedy is no better
        return "node_limit", picks, dual_bound, nodes
    return "greedy_fallback", sorted(greedy), dual_bound, nodes


def _check_cover(matrix: np.ndarray, picks: list[int]) -> None:
    missed = int((matrix.any(axis=0) & ~matrix[picks].any(axis=0)).sum())
    if missed:
        raise RuntimeError(f"transforms {picks} leave {missed} coverable images uncovered")
