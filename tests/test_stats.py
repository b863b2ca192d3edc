"""Object counts per image and Mann-Whitney U comparisons (their plot: tests/test_figures.py)."""

import csv
import itertools
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import mannwhitneyu

from zoomeval.analysis.stats import (
    MANN_WHITNEY_COLUMNS,
    mann_whitney,
    mann_whitney_table,
    object_counts,
    write_mann_whitney_csv,
    write_object_counts,
)
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.manifest import Record

RNG = np.random.default_rng(7)
SAMPLES = {
    "plain": ([0.3, 1.7, 2.2, 5.1, 0.9], [4.4, 3.8, 6.0, 2.5, 7.1, 3.3]),  # exact method
    "ties": (RNG.poisson(2.0, 40).tolist(), RNG.poisson(3.0, 55).tolist()),  # asymptotic with tie correction
    "unequal": (RNG.poisson(4.0, 3).tolist(), RNG.poisson(2.0, 2000).tolist()),
}


def record(image_id: str, n_boxes: int) -> Record:
    boxes = [(i, i, i + 5, i + 5) for i in range(n_boxes)]
    return Record(image_id, f"{image_id}.jpg", [1], ["n01440764"], 32, 32, boxes)


def write_sam_masks(path: Path, counts: dict[str, int], method: str = "sam_auto") -> None:
    table = pa.table(
        {
            "image_id": list(counts),
            "method": [method] * len(counts),
            "mask_png": [b""] * len(counts),
            "area_fraction": pa.array([0.5] * len(counts), pa.float32()),
            "n_objects": pa.array(list(counts.values()), pa.int16()),
            "scores": pa.array([[0.9] * n for n in counts.values()], pa.list_(pa.float32())),
            "box_coverage": pa.array([None] * len(counts), pa.float32()),
        }
    )
    write_parquet(path, table, {"kind": "masks", "method": method})


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_mann_whitney_matches_scipy(name: str):
    a, b = SAMPLES[name]
    expected = mannwhitneyu(a, b, alternative="two-sided")
    result = mann_whitney(a, b)
    assert result["U"] == pytest.approx(expected.statistic)
    assert result["p_value"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert (result["n1"], result["n2"]) == (len(a), len(b))
    assert result["median1"] == pytest.approx(np.median(a)) and result["mean2"] == pytest.approx(np.mean(b))
    assert result["rank_biserial"] == pytest.approx(2 * expected.statistic / (len(a) * len(b)) - 1)


def test_rank_biserial_matches_a_brute_force_pair_count():
    a, b = [1, 3, 3, 5], [2, 3, 4]
    pairs = list(itertools.product(a, b))
    u = sum(x > y for x, y in pairs) + 0.5 * sum(x == y for x, y in pairs)  # 5 wins + 2 ties -> 6
    result = mann_whitney(a, b)
    assert result["U"] == u == 6.0
    assert result["rank_biserial"] == pytest.approx(2 * u / len(pairs) - 1)
    assert mann_whitney([5, 6], [1, 2])["rank_biserial"] == 1.0  # a always larger
    assert mann_whitney([1, 2], [5, 6])["rank_biserial"] == -1.0


@pytest.mark.parametrize(("a", "b"), [([3, 3, 3], [3, 3]), ([2] * 30, [2] * 45), ([0], [0])])
def test_identical_samples_give_p_one_and_no_effect_without_warnings(a: list[int], b: list[int]):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = mann_whitney(a, b)
    assert result["p_value"] == 1.0 and result["rank_biserial"] == 0.0
    assert result["U"] == len(a) * len(b) / 2
    assert not any(np.isnan(v) for v in result.values())


def test_empty_or_nan_sample_is_an_error():
    with pytest.raises(ValueError, match="non-empty"):
        mann_whitney([], [1, 2])
    with pytest.raises(ValueError, match="non-empty"):
        mann_whitney([1], [])
    with pytest.raises(ValueError, match="NaN"):
        mann_whitney([float("nan")], [float("nan")])


def test_bbox_counts_come_from_the_records(tmp_path: Path):
    records = [record("a", 2), record("b", 0), record("c", 3)]
    table = object_counts(records, None, "bbox")
    assert table.schema.field("n_objects").type == pa.int16()
    assert table.to_pydict() == {"image_id": ["a", "b", "c"], "method": ["bbox"] * 3, "n_objects": [2, 0, 3]}
    path = tmp_path / "counts.parquet"
    write_object_counts(path, table, "imagenet")
    meta = read_metadata(path)
    assert (meta["kind"], meta["schema_version"], meta["dataset"], meta["method"]) == (
        "object_counts",
        1,
        "imagenet",
        "bbox",
    )
    assert pq.read_table(path).to_pydict() == table.to_pydict()


def test_sam_auto_counts_come_from_the_mask_file(tmp_path: Path):
    masks = tmp_path / "sam_auto.parquet"
    write_sam_masks(masks, {"c": 4, "a": 1, "b": 0, "extra": 9})
    records = [record("a", 2), record("b", 0), record("c", 3)]
    table = object_counts(records, masks, "sam_auto")
    assert table.to_pydict() == {"image_id": ["a", "b", "c"], "method": ["sam_auto"] * 3, "n_objects": [1, 0, 4]}
    with pytest.raises(ValueError, match=r"no mask for 1 image\(s\).*'d'"):
        object_counts([*records, record("d", 1)], masks, "sam_auto")
    box_masks = tmp_path / "sam_box.parquet"
    write_sam_masks(box_masks, {"a": 1}, method="sam_box")
    with pytest.raises(ValueError, match="expected 'sam_auto'"):
        object_counts(records[:1], box_masks, "sam_auto")
    with pytest.raises(ValueError, match="needs the SAM mask file"):
        object_counts(records, None, "sam_auto")
    with pytest.raises(ValueError, match="unknown object count method"):
        object_counts(records, masks, "sam_box")


def test_mann_whitney_csv_has_stable_columns_and_formatted_values(tmp_path: Path):
    counts = {"imagenet": [1, 1, 2, 3, 1, 2], "objectnet": [1, 1, 1, 1, 2], "imagenet_a": [2, 4, 3, 5, 2]}
    rows = mann_whitney_table(counts, [("imagenet", "objectnet"), ("imagenet", "imagenet_a")])
    path = tmp_path / "mw.csv"
    write_mann_whitney_csv(path, rows)
    with path.open(newline="") as f:
        header, first, second = list(csv.reader(f))
    assert (
        header
        == MANN_WHITNEY_COLUMNS
        == ["dataset1", "dataset2", "n1", "n2", "median1", "median2", "mean1", "mean2", "U", "p_value", "rank_biserial"]
    )
    expected = mannwhitneyu(counts["imagenet"], counts["imagenet_a"], alternative="two-sided")
    assert second[:8] == ["imagenet", "imagenet_a", "6", "5", "1.5000", "3.0000", "1.6667", "3.2000"]
    assert second[8] == f"{expected.statistic:.1f}" == "4.5"  # 2 wins (3 > 2) + 5 ties
    assert second[9] == f"{expected.pvalue:.6g}" and float(second[9]) == pytest.approx(expected.pvalue, rel=1e-5)
    assert second[10] == "-0.700000"  # 2 * 4.5 / 30 - 1
    assert first[:2] == ["imagenet", "objectnet"]
    with pytest.raises(ValueError, match="imagenet_r"):
        mann_whitney_table(counts, [("imagenet", "imagenet_r")])
