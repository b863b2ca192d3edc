"""bench/analysis_bench.py's synthetic prediction files (the benchmark itself is run by hand, not here)."""

import importlib.util

import pyarrow.parquet as pq

from tests.conftest import ROOT
from tests.test_policies import brute_force_set
from zoomeval.analysis.matrix import correctness_matrix
from zoomeval.analysis.policies import greedy_set
from zoomeval.analysis.policy_eval import read_views
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import read_manifest
from zoomeval.core.zoom import ONE_CROP, Transform, paper_scales, transforms

spec = importlib.util.spec_from_file_location("analysis_bench", ROOT / "bench" / "analysis_bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
#: cover_node_limit and cover_time_limit, the defaults
LIMITS = (1000, 1800.0)


def test_the_synthetic_files_score_as_synthesized_and_their_parts_merge_back(tmp_path):
    found = bench.synthesize(tmp_path, 200)
    assert found["rows"] == 200 * 324 and 65 < found["acc_1crop"] < 87 and 93 < found["acc_max"] <= 100
    order = transforms(paper_scales())
    matrix = correctness_matrix(tmp_path / "predictions.parquet", read_manifest(tmp_path / "manifest.parquet"), order)
    assert 100 * matrix[order.index(Transform(*ONE_CROP))].mean() == found["acc_1crop"]
    assert 100 * matrix.any(axis=0).mean() == found["acc_max"]
    assert bench.step("merge", tmp_path, 200, LIMITS) == {"parts": 8, "n_images": 200}  # parts 0-6 empty: 1 shard
    assert pq.read_table(tmp_path / "merged.parquet").equals(pq.read_table(tmp_path / "predictions.parquet"))
    assert read_metadata(tmp_path / "merged.parquet") == read_metadata(tmp_path / "predictions.parquet")
    assert bench.step("matrix", tmp_path, 200, LIMITS)["acc_max"] == found["acc_max"]  # and writes correct.npz
    exact = bench.step("exact", tmp_path, 200, LIMITS)
    assert exact["status"] == "optimal" and exact["gap_to_bound"] == 0 and exact["exact_size"] <= exact["greedy_size"]
    assert bench.step("analyze", tmp_path, 200, LIMITS)["acc_max"] == found["acc_max"]  # and writes metrics.json
    policies = bench.step("policies", tmp_path, 200, LIMITS)  # the zoom_policies job on them
    assert policies["one_crop@1"] == round(found["acc_1crop"], 2) and policies["max_conf@324"] <= found["acc_max"]
    # its table: 5 policies x 9 budgets, the 1-crop, 9 oracle top-k, oracle_max, the 5-/10-crop max and mean rules
    assert bench.step("policies_table", tmp_path, 200, LIMITS) == {"rows": 5 * 9 + 1 + 9 + 1 + 4}
    assert len((tmp_path / "table_zoom_policies.csv").read_text().splitlines()) == 1 + 60


def test_the_greedy_sets_on_the_synthetic_views_are_the_brute_force_ones(tmp_path):
    bench.synthesize(tmp_path, 120)
    bench.step("matrix", tmp_path, 120, LIMITS)
    views, _ = read_views(tmp_path / "correct.npz", tmp_path / "predictions.parquet")
    for vote in (False, True):
        assert greedy_set(views, 6, vote) == brute_force_set(views, 6, vote)
