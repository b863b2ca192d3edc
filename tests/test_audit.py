"""zoomeval audit: the sample, its guarantee and the tolerance rule checked by hand and by exact enumeration; then a
tiny sealed study (the demo model and the same weights under another normalisation, 4 images, 2 scales, one masked
variant) audited clean, and copies of it forged with every hash rewritten, each caught."""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from zoomeval.report.audit import LOGIT_ERROR, detection_bound, logit_error, sample_rows, tolerance
from zoomeval.report.audit_files import row_problems


@pytest.mark.parametrize("rows, n", [(8, 3), (6, 6), (7, 1)])
def test_the_guarantee_is_exact_with_replacement_and_a_lower_bound_without(rows: int, n: int) -> None:
    """Every sample of n of the rows enumerated: the share that holds an altered row, for each count of altered rows."""
    for altered in range(1, rows + 1):
        p = altered / rows
        bad = set(range(altered))
        draws = list(itertools.product(range(rows), repeat=n))  # with replacement: the bound is exact
        assert sum(any(r in bad for r in d) for d in draws) / len(draws) == pytest.approx(detection_bound(p, n))
        subsets = list(itertools.combinations(range(rows), n))  # without, as the audit draws: at least the bound
        found = sum(any(r in bad for r in s) for s in subsets) / len(subsets)
        assert found >= detection_bound(p, n) - 1e-12
        assert found == pytest.approx(1 - math.comb(rows - altered, n) / math.comb(rows, n))
    assert detection_bound(0.25, 3) == 1 - 0.75**3 == 0.578125


def test_a_seeded_sample_is_the_same_in_every_run_and_another_for_another_seed_or_file() -> None:
    first = sample_rows(1000, 10, 5, "results/predictions/demo/original/m.parquet")
    assert list(first) == sorted(set(first.tolist())) and len(first) == 10 and first.max() < 1000
    code = ("from zoomeval.report.audit import sample_rows; "
            "print(sample_rows(1000, 10, 5, 'results/predictions/demo/original/m.parquet').tolist())")  # fmt: skip
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert again.strip() == str(first.tolist())  # another process, another hash seed: the same rows
    assert list(sample_rows(1000, 10, 6, "results/predictions/demo/original/m.parquet")) != list(first)
    assert list(sample_rows(1000, 10, 5, "results/standard/demo/m.parquet")) != list(first)
    assert list(sample_rows(4, 10, 5, "x")) == [0, 1, 2, 3]  # a small file: every row


def test_the_sample_is_uniform_over_the_rows() -> None:
    counts = np.zeros(8)
    for seed in range(3000):
        counts[sample_rows(8, 3, seed, "f")] += 1
    assert np.all(np.abs(counts / 3000 - 3 / 8) < 0.04)  # each row drawn 3/8 of the time (sd 0.009)


def test_the_tolerance_adds_both_runs_errors_twice() -> None:
    assert tolerance(("bf16", "cuda"), ("fp32", "cpu")) == pytest.approx(2 * (1.0 + 1e-3))
    assert tolerance(("fp32", "cpu"), ("fp32", "cpu")) == pytest.approx(4e-3)
    assert logit_error("fp32", "cpu,cuda") == LOGIT_ERROR["fp32", "cuda"]  # a job run in parts: the worst
    assert logit_error("fp32", "cuda:1") == LOGIT_ERROR["fp32", "cuda"]
    assert logit_error("fp32", "mps") == max(v for (p, _), v in LOGIT_ERROR.items() if p == "fp32")
    with pytest.raises(ValueError, match="precision 'int8'"):
        logit_error("int8", "cpu")


def row(pred: int, logits: np.ndarray, classes: np.ndarray, **extra) -> dict:
    """A stored row whose confidence is the softmax probability of ``pred`` over ``classes``."""
    z = logits[classes] - logits[classes].max()
    conf = float(np.exp(z[list(classes).index(pred)]) / np.exp(z).sum()) if pred in classes else 0.5
    return {"pred": pred, "pred_full": int(np.argmax(logits)), "conf": conf, **extra}


def test_a_stored_top1_within_the_tolerance_of_the_recomputed_one_is_a_tie_beyond_it_a_mismatch() -> None:
    logits = np.zeros(1000)
    logits[3], logits[7] = 5.0, 4.99  # classes 3 and 7 are 0.01 apart in log-probability
    everything = np.arange(1000)
    assert row_problems(row(3, logits, everything), logits, everything, 0.05) == ([], False)
    stored = {**row(7, logits, everything), "pred_full": 7}
    assert row_problems(stored, logits, everything, 0.05) == ([], True)
    problems, tie = row_problems(stored, logits, everything, 0.001)
    assert not tie and problems == ["top-1 7 stored, 3 recomputed (0.01 above it in log-probability)"]
    problems, _ = row_problems({**row(500, logits, everything), "pred_full": 500}, logits, everything, 0.05)
    assert problems[0] == "top-1 500 stored, 3 recomputed (5 above it in log-probability)"
    assert row_problems({**row(3, logits, everything), "conf": 0.9}, logits, everything, 0.05)[0] == [
        f"confidence 0.9 stored for class 3, {np.exp(5) / (np.exp(5) + np.exp(4.99) + 998):.4g} recomputed"]


def test_a_subset_is_scored_over_its_classes_and_pred_full_over_all() -> None:
    logits = np.zeros(1000)
    logits[[3, 7, 9]] = [1.0, 2.0, 0.5]
    logits[100] = 9.0  # the top class overall, outside the subset
    subset = np.array([3, 7, 9])
    assert row_problems(row(7, logits, subset), logits, subset, 0.01) == ([], False)
    problems, _ = row_problems({**row(7, logits, subset), "pred_full": 7}, logits, subset, 0.01)
    assert problems == ["top-1 over all classes 7 stored, 100 recomputed (7 above it in log-probability)"]
    assert row_problems(row(5, logits, subset), logits, subset, 0.01)[0][0] == (
        "top-1 5 stored, which is not in the class set")


def test_stored_top5_must_be_the_recomputed_top5_up_to_the_tolerance() -> None:
    logits = np.arange(1000, dtype=float) / 100  # class 999 first, then 998, ...
    good = {"top5": [999, 998, 997, 996, 995], "top5_logit": [9.99, 9.98, 9.97, 9.96, 9.95]}
    everything = np.arange(1000)
    assert row_problems(row(999, logits, everything, **good), logits, everything, 0.05) == ([], False)
    swapped = {"top5": [999, 998, 997, 996, 900], "top5_logit": [9.99, 9.98, 9.97, 9.96, 9.0]}
    problems, _ = row_problems(row(999, logits, everything, **swapped), logits, everything, 0.05)
    assert problems == ["top5 classes [900] stored, recomputed logits [9.0]"]
