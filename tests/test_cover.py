"""Greedy set cover against a plain re-statement of the authors' algorithm and brute force."""

from itertools import combinations

import numpy as np
import pytest

from zoomeval.analysis.cover import greedy_cover


def authors_greedy(matrix: np.ndarray) -> list[int]:
    """The authors' loop: sets as Python sets, max() over an insertion-ordered dict."""
    subsets = {t: {i for i in np.flatnonzero(row)} for t, row in enumerate(matrix)}
    universe = set().union(*subsets.values())
    cover, covered = [], set()
    while covered != universe:
        best = max(subsets.items(), key=lambda kv: len(kv[1] - covered))[0]
        cover.append(best)
        covered |= subsets[best]
    return cover


def min_cover_size(matrix: np.ndarray) -> int:
    universe = matrix.any(axis=0)
    for k in range(matrix.shape[0] + 1):
        for combo in combinations(range(matrix.shape[0]), k):
            if (matrix[list(combo)].any(axis=0) == universe).all():
                return k
    raise AssertionError


def test_hand_example_ties_go_to_the_first_transform():
    m = np.array([[0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=bool)
    assert [(p.index, p.gain) for p in greedy_cover(m)] == [(0, 2), (1, 2)]
    assert greedy_cover(np.zeros((3, 4), bool)) == []


def test_greedy_is_not_optimal_on_the_classic_counterexample():
    # X = {0,1,2}, Y = {3,4,5}, Z = {0,1,3,4}: greedy takes Z first and needs 3 sets, the optimum is 2.
    m = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [1, 1, 0, 1, 1, 0]], dtype=bool)
    assert [(p.index, p.gain) for p in greedy_cover(m)] == [(2, 4), (0, 1), (1, 1)]
    assert min_cover_size(m) == 2


@pytest.mark.parametrize("seed", range(40))
def test_greedy_matches_the_authors_loop_and_is_a_valid_cover(seed):
    rng = np.random.default_rng(seed)
    n_t, n_i = rng.integers(1, 9), rng.integers(1, 70)
    m = rng.random((n_t, n_i)) < rng.uniform(0.05, 0.6)
    picks = greedy_cover(m)
    assert [p.index for p in picks] == authors_greedy(m)
    assert sum(p.gain for p in picks) == m.any(axis=0).sum()
    assert (m[[p.index for p in picks]].any(axis=0) == m.any(axis=0)).all()
    assert [p.gain for p in picks] == sorted((p.gain for p in picks), reverse=True)
    assert len(picks) >= min_cover_size(m)
