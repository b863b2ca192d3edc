"""Each image's held-out choices beside the policies document: their sums are the document's rows, each image is
scored by its own fold's policy, the file round-trips with its metadata, and the best policy at a budget is picked
by hand-countable totals."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_policies import ONE, ORDER, A, B, confident_when_right, metrics, write_files
from zoomeval.analysis import policies as P
from zoomeval.analysis.policy_choices import SCHEMA, best_policy, read_choices, write_choices
from zoomeval.analysis.policy_eval import cv_outputs
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.zoom import ZoomGrid


def test_the_choices_sum_to_the_documents_rows_and_each_image_is_chosen_by_its_folds_policy(tmp_path):
    views = confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4)
    files = write_files(tmp_path, "d", views)
    document, table = cv_outputs(*files, metrics("d"), PoliciesConfig(budgets=(1, 2, 4), folds=3, seed=7))
    budgets = [1, 2, 4, 18]
    assert table.num_rows == 16 * len(P.POLICIES) * len(budgets) and table.schema == SCHEMA
    rows = {(r["policy"], r["budget"]): r for r in document["rows"] if r["policy"] in P.POLICIES}
    assert set(rows) == {(p, b) for p in P.POLICIES for b in budgets}
    data = table.to_pylist()
    for key, row in rows.items():
        mine = [c for c in data if (c["policy"], c["budget"]) == key]
        assert sum(c["correct"] for c in mine) == row["n_correct"] and len(mine) == row["n_images"] == 16
        assert sum(c["passes"] for c in mine) / 16 == pytest.approx(row["passes"])
    fold_of = {i: k for k, ids in enumerate(document["folds"]) for i in ids}
    names = [t.name for t in ORDER]
    unlabelled = views.unlabelled()
    for k in range(3):  # refit each fold's policy: its choices on its own images are the file's
        test = np.array([i for i in range(16) if fold_of[f"d{i}"] == k])
        policy = P.fit(views.subset(np.setdiff1d(np.arange(16), test)), budgets, 10_000, 7)
        for (name, b), (view, _) in P.apply(policy, unlabelled.subset(test), budgets).items():
            mine = [c for c in data if (c["policy"], c["budget"]) == (name, b)]
            got = {c["image_id"]: (c["fold"], c["view"], c["correct"]) for c in mine}
            for i, v in zip(test, view, strict=True):
                assert got[f"d{i}"] == (k, names[v], bool(views.correct[i, v]))


def test_the_file_round_trips_and_another_kind_is_refused(tmp_path):
    views = confident_when_right([{ONE}, {A}], 2)
    _, table = cv_outputs(*write_files(tmp_path, "d", views), metrics("d"), PoliciesConfig(budgets=(1,), folds=2))
    write_choices(tmp_path / "c.parquet", table, model="m", protocol="cv2")
    back, meta = read_choices(tmp_path / "c.parquet")
    assert back.equals(table) and meta == {
        "kind": "policy_choices",
        "schema_version": 1,
        "model": "m",
        "protocol": "cv2",
    }
    pq.write_table(table, tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match="plain.parquet: no zoomeval metadata; expected a file written by zoomeval"):
        read_choices(tmp_path / "plain.parquet")  # no zoomeval metadata at all
    write_choices(tmp_path / "old.parquet", table)
    old = pq.read_table(tmp_path / "old.parquet")
    meta = {b"zoomeval": b'{"kind": "policy_choices", "schema_version": 0}'}
    pq.write_table(old.replace_schema_metadata(meta), tmp_path / "old.parquet")
    with pytest.raises(ValueError, match="old.parquet: not a policy_choices file of schema version 1"):
        read_choices(tmp_path / "old.parquet")


def test_a_dataset_too_small_to_cross_validate_has_no_choices(tmp_path):
    files = write_files(tmp_path, "d", confident_when_right([{ONE}], 1))
    document, table = cv_outputs(*files, metrics("d"), PoliciesConfig(budgets=(1, 2), folds=5))
    assert "not_fitted" in document and table.num_rows == 0 and best_policy(table, 2) is None


def hand_table(correct: dict[tuple[str, int], list[bool]]) -> pa.Table:
    rows = [
        {"image_id": f"im{i}", "fold": 0, "policy": p, "budget": b, "view": "x", "passes": float(b), "correct": c}
        for (p, b), cs in correct.items()
        for i, c in enumerate(cs)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def test_the_best_policy_is_the_most_often_right_at_the_budget_ties_to_the_earlier():
    table = hand_table(
        {
            ("max_conf", 2): [True, False, False],
            ("vote", 2): [False, True, True],
            ("cascade", 2): [True, True, False],
            ("selector", 4): [True, True, True],
        }
    )
    name, ids, right = best_policy(table, 2)  # vote 2 and cascade 2: the earlier, vote
    assert name == "vote" and ids.tolist() == ["im0", "im1", "im2"] and right.tolist() == [False, True, True]
    assert best_policy(table, 4)[0] == "selector" and best_policy(table, 3) is None


def test_the_where_zoom_helps_budget_must_be_a_policies_budget_or_every_view():
    import re

    import yaml

    from tests.conftest import ROOT
    from zoomeval.core.config import ConfigError, WhereZoomConfig
    from zoomeval.registries import load_config

    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())  # 36 scales: 324 transforms
    assert load_config(dict(demo), check_paths=False).where_zoom_helps == WhereZoomConfig(budget=4)
    for budget in (9, 324, 1000):  # a policies budget; every view; above it (every view)
        assert load_config({**demo, "where_zoom_helps": {"budget": budget}}, check_paths=False)
    message = "where_zoom_helps.budget: 3 is not one of policies.budgets [1, 2, 4, 9, 18, 36, 72, 144, 324]"
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({**demo, "where_zoom_helps": {"budget": 3}}, check_paths=False)
    with pytest.raises(ConfigError, match=re.escape("where_zoom_helps.budget: 0 is less than the minimum of 1")):
        load_config({**demo, "where_zoom_helps": {"budget": 0}}, check_paths=False)


def test_read_cell_scores_the_best_policy_per_bin_from_the_files_and_refuses_a_budget_without_choices(tmp_path):
    """16 images with a box each: the size axis's n_policy sums to the best policy's n_correct in the document; a
    budget above the 18 transforms is every view; a budget the policies were not scored at is refused."""
    from zoomeval.analysis.matrix import write_matrix
    from zoomeval.analysis.metrics import metrics_document
    from zoomeval.core.io import write_json
    from zoomeval.core.manifest import Record, write_manifest
    from zoomeval.inference.tables import prediction_table, write_table
    from zoomeval.report.where_zoom_helps import read_cell

    views = confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4)
    records = [Record(f"d{i}", f"{i}.png", [0], ["n0"], 40, 40, [(0, 0, 2 + 2 * i, 20)]) for i in range(16)]
    write_matrix(tmp_path / "correct.npz", views.correct.T, ORDER, records, 224)
    columns = {"pred": views.pred, "pred_full": views.pred, "conf": views.conf}
    table = prediction_table(records, ZoomGrid((128, 256)), columns)
    write_table(tmp_path / "p.parquet", table, {"kind": "predictions"})
    write_manifest(tmp_path / "manifest.parquet", records, "d")
    write_json(tmp_path / "metrics.json", metrics_document(metrics("d")))
    document, table = cv_outputs(
        tmp_path / "correct.npz", tmp_path / "p.parquet", metrics("d"), PoliciesConfig(budgets=(1, 2, 4), folds=3)
    )
    write_choices(tmp_path / "c.parquet", table)
    paths = [tmp_path / name for name in ("manifest.parquet", "correct.npz", "metrics.json", "c.parquet")]
    for budget, used in ((4, 4), (1000, 18)):
        _, _, _, rows, no_box = read_cell("m", "d", paths, budget)
        policy = rows[0]["policy"]
        best = max(
            (r for r in document["rows"] if r["policy"] in P.POLICIES and r["budget"] == used),
            key=lambda r: (r["n_correct"], -P.POLICIES.index(r["policy"])),
        )
        assert no_box == 0 and {(r["policy"], r["budget"]) for r in rows} == {(best["policy"], used)}
        assert sum(r["n_policy"] for r in rows if r["axis"] == "size") == best["n_correct"]
        assert sum(r["n_policy"] for r in rows if r["axis"] == "centre") == best["n_correct"] and policy
    with pytest.raises(ValueError, match="c.parquet: no policy at budget 3 \\(where_zoom_helps.budget\\)"):
        read_cell("m", "d", paths, 3)
