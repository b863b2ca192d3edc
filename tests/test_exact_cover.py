"""Exact set cover against brute force, the row reduction against a plain definition, and the greedy fallback."""

from collections.abc import Callable
from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import OptimizeResult

from zoomeval.analysis import exact_cover as ec
from zoomeval.analysis.cover import greedy_cover
from zoomeval.analysis.exact_cover import exact_cover, reduce_rows

# X = {0,1,2}, Y = {3,4,5}, Z = {0,1,3,4}: greedy takes Z first and needs 3 sets, the optimum is {X, Y}.
COUNTEREXAMPLE = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 1, 0, 1, 1, 0]], dtype=bool)


def covers(matrix: np.ndarray, picks: list[int]) -> bool:
    return bool((matrix[picks].any(axis=0) >= matrix.any(axis=0)).all())


def min_cover_size(matrix: np.ndarray) -> int:
    for k in range(matrix.shape[0] + 1):
        if any(covers(matrix, list(combo)) for combo in combinations(range(matrix.shape[0]), k)):
            return k
    raise AssertionError


def minimal_columns(matrix: np.ndarray) -> set[frozenset[int]]:
    """The reduction by its definition: distinct non-empty covering sets with no strict subset among them."""
    sets = {frozenset(np.flatnonzero(col).tolist()) for col in matrix.T} - {frozenset()}
    return {a for a in sets if not any(b < a for b in sets)}


def structured(rng: np.random.Generator, n_transforms: int, n_images: int) -> np.ndarray:
    """Each image is correct on a noisy window of consecutive transforms (a 1-D stand-in for nearby zooms)."""
    centre = rng.integers(0, n_transforms, n_images)
    width = rng.integers(1, max(2, n_transforms // 4), n_images)
    dist = np.abs(np.arange(n_transforms)[:, None] - centre[None, :])
    p = np.where(dist <= width[None, :], 0.9, 0.01)
    return rng.random((n_transforms, n_images)) < p


@pytest.mark.parametrize("seed", range(40))
def test_exact_cover_is_minimum_on_random_instances(seed):
    rng = np.random.default_rng(seed)
    n_t, n_i = rng.integers(3, 10), rng.integers(1, 61)
    m = rng.random((n_t, n_i)) < rng.uniform(0.05, 0.6)
    result = exact_cover(m)
    assert result.size == len(result.picks) == min_cover_size(m)
    assert result.picks == sorted(result.picks) and covers(m, result.picks)
    assert result.status == ("empty" if result.size == 0 else "optimal")
    if result.status == "optimal":
        assert result.dual_bound == pytest.approx(result.size)
    assert result.size <= len(greedy_cover(m))


@pytest.mark.parametrize("seed", range(10))
def test_reduction_keeps_exactly_the_covers(seed):
    rng = np.random.default_rng(100 + seed)
    m = rng.random((rng.integers(3, 10), rng.integers(1, 61))) < rng.uniform(0.05, 0.6)
    reduced = reduce_rows(m)
    assert {frozenset(np.flatnonzero(col).tolist()) for col in reduced.T} == minimal_columns(m)
    assert reduced.shape[1] == len(minimal_columns(m))
    for k in range(m.shape[0] + 1):
        for combo in combinations(range(m.shape[0]), k):
            assert covers(reduced, list(combo)) == covers(m, list(combo))


def test_reduce_rows_hand_example():
    m = np.array(
        # image: 0  1  2  3  4  5  6  7
        [[1, 1, 0, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 0, 1, 1], [0, 0, 0, 1, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 0]],
        dtype=bool,
    )
    # 1 contains 0 (dominated), 2 is never covered, 4 repeats 0, 6 contains everything, 7 repeats 3.
    expected = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1], [0, 0, 1]], dtype=bool)
    np.testing.assert_array_equal(reduce_rows(m), expected)


@pytest.mark.parametrize("budget", [1, 7, 1 << 20])
def test_reduction_over_many_words_and_chunks(monkeypatch, budget):
    # 150 transforms span three uint64 words; tiny budgets force one-image chunks and the within-chunk test.
    monkeypatch.setattr(ec, "_PAIR_BUDGET", budget)
    m = structured(np.random.default_rng(7), 150, 300)
    reduced = reduce_rows(m)
    assert {frozenset(np.flatnonzero(col).tolist()) for col in reduced.T} == minimal_columns(m)
    assert reduced.shape[1] == len(minimal_columns(m))


def test_greedy_counterexample_is_solved_exactly():
    assert len(greedy_cover(COUNTEREXAMPLE)) == 3
    result = exact_cover(COUNTEREXAMPLE)
    assert (result.size, result.status, result.picks) == (2, "optimal", [0, 1])


@pytest.mark.parametrize("shape", [(4, 5), (0, 3), (3, 0)])
def test_empty_universe(shape):
    result = exact_cover(np.zeros(shape, dtype=bool))
    assert (result.size, result.status, result.picks, result.reduced_rows) == (0, "empty", [], 0)
    assert reduce_rows(np.zeros(shape, dtype=bool)).shape == (shape[0], 0)


def fake_milp(
    status: int, x: list[float] | None, bound: float, nodes: int | None = ec.COVER_NODE_LIMIT
) -> Callable[..., OptimizeResult]:
    """A stand-in for ``scipy.optimize.milp`` that ends with ``status`` and solution ``x`` after ``nodes`` nodes (by
    default at the node limit, where HiGHS's "solution limit" status is milp's 4)."""

    def milp(*args: object, **kwargs: object) -> OptimizeResult:
        solution = None if x is None else np.array(x)
        return OptimizeResult(
            status=status, success=status == 0, x=solution, mip_dual_bound=bound, mip_node_count=nodes, message="fake"
        )

    return milp


def test_node_limit_without_solution_falls_back_to_greedy(monkeypatch):
    monkeypatch.setattr(ec, "milp", fake_milp(4, None, 1.5))
    result = exact_cover(COUNTEREXAMPLE, greedy=[2, 0, 1])
    assert (result.status, result.size, result.picks, result.dual_bound) == ("greedy_fallback", 3, [0, 1, 2], 1.5)


def test_node_limit_with_worse_solution_falls_back_and_better_one_is_kept(monkeypatch):
    monkeypatch.setattr(ec, "milp", fake_milp(4, [1, 1, 1], float("-inf")))
    result = exact_cover(COUNTEREXAMPLE, greedy=[0, 1])
    assert (result.status, result.picks, result.dual_bound) == ("greedy_fallback", [0, 1], None)
    monkeypatch.setattr(ec, "milp", fake_milp(4, [1, 1, 1e-9], 2.0))
    result = exact_cover(COUNTEREXAMPLE, greedy=[2, 0, 1])
    assert (result.status, result.size, result.picks, result.dual_bound) == ("node_limit", 2, [0, 1], 2.0)


@pytest.mark.parametrize("solution", [None, [1, 1, 0]])
def test_a_time_limit_before_the_node_limit_gives_no_cover(monkeypatch, solution):
    """Even with a cover better than greedy in hand: where the clock stopped would decide its size."""
    monkeypatch.setattr(ec, "milp", fake_milp(1, solution, 1.5, nodes=7))
    with pytest.raises(ec.CoverTimeLimit) as info:
        exact_cover(COUNTEREXAMPLE, node_limit=50, time_limit=2.5, greedy=[2, 0, 1])
    assert str(info.value) == (
        "the exact cover's search reached cover_time_limit (2.5 s) after 7 nodes, before its cover_node_limit (50), "
        "so its result would depend on this machine's speed: raise cover_time_limit, or lower cover_node_limit"
    )


def test_invalid_cover_is_rejected(monkeypatch):
    monkeypatch.setattr(ec, "milp", fake_milp(4, None, 1.0))
    with pytest.raises(RuntimeError, match="uncovered"):
        exact_cover(COUNTEREXAMPLE, greedy=[0])


def hard(n_transforms: int, n_images: int, seed: int) -> np.ndarray:
    """A random set-cover matrix of density 0.15 that HiGHS cannot solve at its root: 40 x 300 (seed 1) reduces to
    115 images and is proven at 13 nodes; 60 x 400 (seed 0) to 372 images, proven at 2,099 nodes (about 14 s)."""
    return np.random.default_rng(seed).random((n_transforms, n_images)) < 0.15


def test_the_node_limit_decides_the_cover_with_or_without_a_time_limit():
    """The work limit binds first: the same cover, bound, status and nodes whether a wall-clock limit is set or not,
    and the limit did bind (without it the search goes on to prove a smaller or equal cover)."""
    m = hard(40, 300, 1)
    limited = [exact_cover(m, node_limit=5, time_limit=t) for t in (None, 600.0)]
    assert limited[0].status == "node_limit" and limited[0].nodes == 5 and covers(m, limited[0].picks)
    assert all(replace(r, seconds=0.0) == replace(limited[0], seconds=0.0) for r in limited)
    assert limited[0].dual_bound < limited[0].size  # not proven
    proven = exact_cover(m, node_limit=10_000)
    assert proven.status == "optimal" and 5 < proven.nodes < 10_000 and proven.size <= limited[0].size


def test_a_real_search_cut_short_by_the_clock_gives_no_cover():
    """HiGHS itself at a 10 ms limit on a matrix it needs thousands of nodes for: milp's time status is refused."""
    with pytest.raises(ec.CoverTimeLimit, match=r"reached cover_time_limit \(0.01 s\)(| after \d+ nodes), before"):
        exact_cover(hard(60, 400, 0), node_limit=100_000, time_limit=0.01)


def test_medium_structured_instance():
    m = structured(np.random.default_rng(3), 60, 3000)
    m[:, :50] = False  # some images no transform gets right
    greedy = [p.index for p in greedy_cover(m)]
    result = exact_cover(m, greedy=greedy)
    assert result.status == "optimal" and covers(m, result.picks)
    assert result.dual_bound == pytest.approx(result.size) and result.size <= len(greedy)
    assert 0 < result.reduced_rows < 3000
    assert replace(exact_cover(m, greedy=greedy), seconds=result.seconds) == result  # deterministic
