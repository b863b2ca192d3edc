"""Label-free zoom policies and their held-out evaluation, on fixtures whose answers are worked out by hand."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import LAYOUT, ROOT
from zoomeval.analysis import policies as P
from zoomeval.analysis import policy_eval
from zoomeval.analysis.matrix import write_matrix
from zoomeval.analysis.metrics import Metrics
from zoomeval.analysis.policy_eval import (
    assign_folds,
    cross_validate,
    cv_document,
    paired,
    policy_rows,
    reference_rows,
    transfer,
    transfer_document,
)
from zoomeval.analysis.stats import wilson_interval
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP, Transform, ZoomGrid, transforms
from zoomeval.inference.tables import prediction_table, write_table
from zoomeval.report.zoom_policies import (
    COLUMNS,
    _paired_cell,
    gap_closed,
    memo_rows,
    plot_zoom_policies,
    significant_gain,
    table_rows,
    write_table_zoom_policies,
)

SCALES = [128, 256]  # 18 transforms, the 1-crop among them
GRID = ZoomGrid(SCALES)
ORDER = transforms(SCALES)
ONE = ORDER.index(Transform(*ONE_CROP))
A, B = ORDER.index(Transform(128, 0, 0)), ORDER.index(Transform(256, 2, 2))


def confident_when_right(patterns: list[set[int]], copies: int) -> P.Views:
    """Images whose right views (``patterns[j]``: the transforms that solve pattern j) are always more confident than
    their wrong ones; a wrong view predicts a class of its own (no two agree), a right one the label 0."""
    correct = np.zeros((len(patterns) * copies, len(ORDER)), bool)
    for j, solving in enumerate(patterns):
        correct[j * copies : (j + 1) * copies, sorted(solving)] = True
    rng = np.random.default_rng(1)
    conf = np.where(correct, rng.uniform(0.6, 0.9, correct.shape), rng.uniform(0.1, 0.5, correct.shape))
    pred = np.where(correct, 0, 1 + np.arange(len(ORDER))[None, :])
    return P.Views(pred.astype(np.int16), conf.astype(np.float32), correct, ORDER)


def accuracy(views: P.Views, chosen: np.ndarray) -> float:
    return 100 * float(views.correct[np.arange(views.n_images), chosen].mean())


def test_the_most_confident_right_view_reaches_acc_max_at_the_smallest_covering_k():
    # 1-crop solves patterns 0-3, A patterns 4-6 (and 0), B patterns 7-8; pattern 9 is never solved: acc_max 90 %
    patterns = [{ONE, A}, {ONE}, {ONE}, {ONE}, {A}, {A}, {A}, {B}, {B}, set()]
    views = confident_when_right(patterns, copies=10)
    acc_max = 100 * views.correct.any(axis=1).mean()
    covering = min(
        k
        for k in range(1, 5)
        for s in combinations(range(len(ORDER)), k - 1)
        if views.correct[:, [ONE, *s]].any(axis=1).mean() * 100 == acc_max
    )
    assert (acc_max, covering) == (90.0, 3)  # 1-crop, A, B
    budgets = [1, 2, 3, 4, 18]
    choices, folds, fitted = cross_validate(views, budgets, n_folds=5, seed=0, max_rows=10_000)
    assert all(p.max_conf[:3] == [ONE, A, B] for p in fitted)  # every calibration set holds every pattern
    acc = {b: accuracy(views, choices["max_conf", b][0]) for b in budgets}
    assert acc == {1: 40.0, 2: 70.0, 3: 90.0, 4: 90.0, 18: 90.0}
    assert accuracy(views, choices["max_conf_cover", 3][0]) == 90.0  # 1-crop, then the cover of what it misses


def complementary_pairs(n_pairs: int, seed: int) -> P.Views:
    """Pairs of images with the same views (pred 0 or 1, random conf) and labels 0 and 1: a label-free policy answers
    both alike, so exactly one of the two is right, whatever it does."""
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, 2, (n_pairs, len(ORDER))).astype(np.int16)
    conf = rng.uniform(0.2, 1, (n_pairs, len(ORDER))).astype(np.float32)
    pred, conf = np.repeat(pred, 2, axis=0), np.repeat(conf, 2, axis=0)
    return P.Views(pred, conf, pred == np.tile([0, 1], n_pairs)[:, None], ORDER)


def test_confidence_independent_of_correctness_gains_nothing_beyond_chance():
    budgets = [1, 2, 4, 9, 18]
    # exactly: fitted on one such set, every policy scores 50 % on another, the 1-crop's accuracy (no gap closed)
    choices, _ = transfer(complementary_pairs(100, 0), complementary_pairs(100, 1), budgets, 0, 10_000)
    rows = policy_rows(choices, complementary_pairs(100, 1).correct, ONE)
    assert {r["acc"] for r in rows} == {50.0} and len(rows) == len(P.POLICIES) * len(budgets)
    assert gap_closed(50.0, 50.0, 100.0) == 0.0
    # held out within one dataset (views right or wrong at random, conf independent): within its 95 % interval
    rng = np.random.default_rng(2)
    correct = rng.random((400, len(ORDER))) < 0.5
    views = P.Views(np.where(correct, 0, 1).astype(np.int16), rng.random(correct.shape, np.float32), correct, ORDER)
    choices, _, _ = cross_validate(views, budgets, 5, 0, 10_000)
    chance = policy_rows({("max_conf", 18): choices["max_conf", 18]}, correct, ONE)[0]
    assert chance["acc_lo"] <= 50 <= chance["acc_hi"] and chance["acc_hi"] - chance["acc_lo"] < 10


def test_the_cascade_passes_and_accuracy_by_hand_on_six_images():
    conf = np.full((6, len(ORDER)), 0.05, np.float32)
    chosen = [ONE, A, B]
    conf[:, chosen] = [
        [0.7, 0.2, 0.1],  # stops at the 1-crop: 1 pass
        [0.3, 0.8, 0.1],  # at A: 2 passes
        [0.3, 0.5, 0.9],  # at B: 3 passes
        [0.4, 0.5, 0.2],  # never: 3 passes, answers A (the most confident)
        [0.6, 0.9, 0.9],  # conf = tau stops: 1 pass
        [0.5, 0.5, 0.55],  # never: 3 passes, answers B
    ]
    correct = np.zeros(conf.shape, bool)
    correct[[0, 1, 2, 3, 4, 5], [ONE, ONE, B, A, A, ONE]] = True  # right: 0, 2, 3 (not 1, 4, 5)
    views = P.Views(np.zeros(conf.shape, np.int16), conf, correct, ORDER).unlabelled()
    view, passes = P.choose_cascade(views, chosen, tau=0.6, length=3)
    assert passes.tolist() == [1, 2, 3, 3, 1, 3] and passes.mean() == 13 / 6
    assert view.tolist() == [ONE, A, B, A, ONE, B]
    assert correct[np.arange(6), view].tolist() == [True, False, True, True, False, False]
    view, passes = P.choose_cascade(views, chosen, tau=0.6, length=2)  # at most 2 views
    assert passes.tolist() == [1, 2, 2, 2, 1, 2] and view.tolist() == [ONE, A, A, A, ONE, ONE]
    # on these images as calibration: within 2 passes on average the best is tau = 0.6 over 3 views (13/6 > 2 is
    # not allowed), so a pair with fewer passes wins; 1 pass is the 1-crop
    labelled = P.Views(views.pred, conf, correct, ORDER)
    fitted = P.fit_cascade(labelled, chosen, [1, 2, 3])
    assert fitted[1][1] == 1
    for budget, (tau, length) in fitted.items():
        assert P.choose_cascade(views, chosen, tau, length)[1].mean() <= budget


def test_the_vote_takes_the_most_frequent_class_then_the_more_confident_view():
    pred = np.array([[3, 4, 4], [3, 4, 5], [6, 6, 7]], np.int16)
    conf = np.array([[0.9, 0.2, 0.3], [0.4, 0.6, 0.5], [0.5, 0.5, 0.9]], np.float32)
    full = np.zeros((3, len(ORDER)), np.int16), np.zeros((3, len(ORDER)), np.float32)
    full[0][:, [ONE, A, B]], full[1][:, [ONE, A, B]] = pred, conf
    views = P.Views(full[0], full[1], None, ORDER)
    assert P.class_counts(pred).tolist() == [[1, 2, 2], [1, 1, 1], [2, 2, 1]]
    assert P.choose_vote(views, [ONE, A, B]).tolist() == [B, A, ONE]  # tie 0.5 = 0.5 in row 3: the earlier view


def replay(views: P.Views, sequence: list[int], vote: bool) -> np.ndarray:
    """Brute force: whether each image's answer is right once the views of ``sequence`` are added one at a time.
    max_conf's answer moves to a strictly more confident view; the vote's to a view of the answer's class, or of a
    class with more views, or with as many and a strictly more confident view."""
    rows = np.arange(views.n_images)
    count, top = np.zeros((2, views.n_images, int(views.pred.max()) + 1))
    lead, peak, right = views.pred[:, sequence[0]], np.full(views.n_images, -np.inf), None
    for t in sequence:
        k, c = views.pred[:, t], views.conf[:, t].astype(np.float64)
        count[rows, k] += 1
        top[rows, k] = np.maximum(top[rows, k], c)
        more, same = count[rows, k] > count[rows, lead], count[rows, k] == count[rows, lead]
        moves = (k == lead) | more | (same & (top[rows, k] > top[rows, lead])) if vote else c > peak
        lead, peak = np.where(moves, k, lead), np.where(moves, c, peak)
        right = np.where(moves, views.correct[:, t], right)
    return right


def brute_force_set(views: P.Views, size: int, vote: bool) -> list[int]:
    """The greedy set by recounting, for every candidate, the images its set's rule gets right."""
    chosen = [P.start_view(views.order)]
    while len(chosen) < size:
        hits = [-1 if t in chosen else int(replay(views, [*chosen, t], vote).sum()) for t in range(len(views.order))]
        chosen.append(int(np.argmax(hits)))
    return chosen


def tied_views(seed: int, n_images: int) -> P.Views:
    """Random views full of ties: 4 classes, conf in sixteenths (count + conf / 2 is exact), 1 or 2 labels per image
    (a view is right by its class, as in every correctness matrix), some images never right."""
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, 4, (n_images, len(ORDER))).astype(np.int16)
    conf = (rng.integers(0, 17, pred.shape) / 16).astype(np.float32)
    labels = np.stack([rng.integers(0, 4, n_images), rng.integers(0, 6, n_images)], axis=1)  # 4, 5: no second
    return P.Views(pred, conf, (pred[:, :, None] == labels[:, None, :]).any(axis=2), ORDER)


@pytest.mark.parametrize("seed", range(6))
def test_the_greedy_sets_are_the_brute_force_ones_on_random_tied_views(seed, monkeypatch):
    monkeypatch.setattr(P, "CHUNK_IMAGES", 7)  # the searches' runs of images cross chunk boundaries
    views = tied_views(seed, 40)
    for vote in (False, True):
        assert P.greedy_set(views, len(ORDER), vote) == brute_force_set(views, len(ORDER), vote)


def test_the_vote_numbers_each_images_classes_and_needs_conf_in_0_1():
    slots, n_slots = P.class_slots(np.array([[5, 3, 5, 9], [7, 7, 7, 7], [2, 1, 0, 1]], np.int16))
    assert slots.tolist() == [[1, 0, 1, 2], [0, 0, 0, 0], [2, 1, 0, 1]] and n_slots == 3
    views = tied_views(0, 10)
    with pytest.raises(ValueError, match=r"conf must lie in \[0, 1\]"):
        P.greedy_set(replace(views, conf=views.conf * 2), 3, vote=True)
    assert P.greedy_set(replace(views, conf=views.conf * 2), 3, vote=False) == brute_force_set(views, 3, False)


def test_folds_never_share_an_image_and_each_calibrates_on_the_others(tmp_path):
    files = write_files(tmp_path, "d", confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4))
    document = cv_document(*files, metrics("d"), PoliciesConfig(budgets=(1, 2, 4), folds=3, seed=7))
    folds = [set(f) for f in document["folds"]]
    assert sum(len(f) for f in folds) == len(set().union(*folds)) == 16 and len(folds) == 3
    assert all(a.isdisjoint(b) for a, b in combinations(folds, 2))
    assert [r["n_calibration"] for r in document["fitted"]] == [16 - len(f) for f in folds]
    assert document["protocol"] == "cv3" and assign_folds(16, 3, 7).tolist() == assign_folds(16, 3, 7).tolist()
    one = next(r for r in document["rows"] if r["policy"] == "one_crop")
    assert (
        one["acc"] == 50.0
        and one["n_images"] == 16
        and (one["acc_lo"], one["acc_hi"]) == pytest.approx([100 * x for x in wilson_interval(8, 16)])
    )
    assert all(r["acc"] == 50.0 for r in document["rows"] if r["budget"] == 1)  # every set starts at the 1-crop
    oracle = [r for r in document["rows"] if r["policy"] == "oracle_max"]
    assert [(r["budget"], r["acc"]) for r in oracle] == [(18, 75.0)]


def test_a_transfer_run_fits_the_same_policy_whatever_the_targets_labels(tmp_path, monkeypatch):
    source = write_files(tmp_path / "s", "s", confident_when_right([{ONE}, {A}, {ONE, B}, {B}, set()], 6))
    target = confident_when_right([{A}, {B}, {ONE}], 5)
    settings = PoliciesConfig(budgets=(1, 2, 4))
    calls = []  # what the run reads and does, in order
    read, choose = policy_eval.read_matrix, policy_eval.transfer
    monkeypatch.setattr(policy_eval, "read_matrix", lambda path: calls.append(Path(path).parent.name) or read(path))
    monkeypatch.setattr(policy_eval, "transfer", lambda *args: calls.append("choices") or choose(*args))
    first = transfer_document(source, write_files(tmp_path / "t", "t", target), metrics("t"), "s", settings)
    assert calls == ["s", "choices", "t"]  # the target's correctness matrix is read once every choice is made
    scrambled = P.Views(target.pred, target.conf, np.random.default_rng(3).permutation(target.correct), ORDER)
    second = transfer_document(source, write_files(tmp_path / "u", "t", scrambled), metrics("t"), "s", settings)
    assert first["fitted"] == second["fitted"] and first["protocol"] == "transfer:s"
    passes = {(r["policy"], r["budget"]): r["passes"] for r in first["rows"]}
    assert passes == {(r["policy"], r["budget"]): r["passes"] for r in second["rows"]}
    assert first["rows"] != second["rows"]  # the scores do read the (scrambled) labels, once the choices are made


def test_the_table_and_figure_show_every_point_with_its_interval(tmp_path):
    files = write_files(tmp_path, "d", confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4))
    one_bad = replace(metrics("d"), left_out=LeftOut("d", {"unreadable": 1}, {}))
    document = cv_document(*files, one_bad, PoliciesConfig(budgets=(1, 2, 4), folds=2))
    (tmp_path / "tta.csv").write_text("method,model,d,mean\nnone,m,60.00,60.00\nmemo_augmix,m,62.50,62.50\n")
    memo = memo_rows(tmp_path / "tta.csv", [document, document], passes=5)  # once per (model, variant, dataset)
    write_table_zoom_policies([document], memo, tmp_path / "t.csv", tmp_path / "t.md")
    with open(tmp_path / "t.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        cells = list(reader)
    assert reader.fieldnames == [*COLUMNS, "n_bad", "n_unscored", "left_out"]
    why = f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='d')})"
    assert {(c["n_bad"], c["n_unscored"], c["left_out"]) for c in cells} == {("1", "0", why)}  # every row says it
    assert f"d: {why}." in (tmp_path / "t.md").read_text()
    one = next(c for c in cells if c["policy"] == "one_crop")
    assert (one["protocol"], one["passes"], one["acc"], one["acc_max"], one["gap_closed"]) == (
        "in_sample",
        "1.00",
        "50.00",
        "75.00",
        "0.00",
    )
    memo_cells = [(c["protocol"], c["passes"], c["n_correct"], c["acc"]) for c in cells if "memo" in c["policy"]]
    assert memo_cells == [("in_sample", "5.00", "10", "62.50")]  # 62.5 % of 16 images; memo_rrc did not run
    top = next(c for c in cells if c["policy"] == "oracle_max")
    assert (top["budget"], top["acc"], top["gap_closed"]) == ("18", "75.00", "100.00")
    assert {c["policy"] for c in cells if c["protocol"] == "cv2"} == set(P.POLICIES)
    assert "Schema version 2" in (tmp_path / "t.md").read_text()
    plot_zoom_policies([document], memo, tmp_path / "f.png", "demo")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("one_crop", "right", "lost", "gained", "p"),
    [
        # 2 right -> wrong, 5 wrong -> right, 1 concordant: P(X <= 2 or X >= 5 | 7, 1/2) = 2 (1 + 7 + 21) / 128
        ("TTTFFFFFT", "TFFTTTTTT", 2, 5, 58 / 128),
        # tie-free (no concordant pair) and all discordant one way: 2 P(X = 6 | 6, 1/2) = 2 / 64
        ("FFFFFF", "TTTTTT", 0, 6, 2 / 64),
        # all discordant both ways: 1 lost, 5 gained: 2 (1 + 6) / 64
        ("TFFFFF", "FTTTTT", 1, 5, 14 / 64),
        ("TTFF", "FFTT", 2, 2, 1.0),  # as many lost as gained
        ("TFTF", "TFTF", 0, 0, 1.0),  # no discordant pair: nothing to test
    ],
)
def test_the_paired_counts_and_exact_mcnemar_p_by_hand(one_crop, right, lost, gained, p):
    bits = [np.array([c == "T" for c in text]) for text in (one_crop, right)]
    pair = paired(*bits)
    assert (pair["n_right_to_wrong"], pair["n_wrong_to_right"]) == (lost, gained)
    assert pair["mcnemar_p"] == pytest.approx(p, rel=1e-12)


def test_a_gap_closed_interval_stops_at_100_only_where_the_row_answers_with_a_zoom_transform():
    """acc_1crop 50, acc_max 60: a cascade at 55 [40, 70] closes 50 % of the gap, its interval [-100, 100] (its top,
    70, is beyond what any one transform's answers can reach); MEMO, which adapts the model, keeps (70 - 50) / 10."""
    point = {"policy": "cascade", "budget": 4, "acc": 55.0, "acc_lo": 40.0, "acc_hi": 70.0}
    document = {
        "model": "m",
        "variant": "original",
        "dataset": "d",
        "protocol": "cv5",
        "acc_1crop": 50.0,
        "acc_max": 60.0,
        "left_out": None,
        "rows": [point],
    }
    memo = [{"model": "m", "variant": "original", "dataset": "d", "row": {**point, "policy": "memo_rrc"}}]
    rows = {r["policy"]: r for r in table_rows([document], memo)}
    assert [rows["cascade"][f"gap_closed{s}"] for s in ("", "_lo", "_hi")] == [50.0, -100.0, 100.0]
    assert [rows["memo_rrc"][f"gap_closed{s}"] for s in ("", "_lo", "_hi")] == [50.0, -100.0, 200.0]


def test_the_paired_cell_reads_plainly_where_no_image_changes_side():
    assert _paired_cell({"n_right_to_wrong": 0, "n_wrong_to_right": 0, "mcnemar_p": 1.0}) == "the same images right"
    assert _paired_cell({"n_right_to_wrong": 2, "n_wrong_to_right": 5, "mcnemar_p": 58 / 128}) == "-2 +5 (p 0.453125)"
    assert _paired_cell({"n_right_to_wrong": None, "n_wrong_to_right": None, "mcnemar_p": None}) == ""


def test_the_table_pairs_every_per_image_row_with_the_1crop_on_the_same_images(tmp_path):
    # 8 images: the 1-crop right on the first 3; view A right on images 2..7 (1-crop and A disagree on 7 of 8)
    correct = np.zeros((8, len(ORDER)), bool)
    correct[:3, ONE], correct[2:, A] = True, True
    always_a = (np.full(8, A), np.ones(8))
    (row_a,) = policy_rows({("max_conf", 2): always_a}, correct, ONE)
    assert (row_a["n_right_to_wrong"], row_a["n_wrong_to_right"]) == (2, 5)  # images 0, 1 lost; 3..7 gained
    assert row_a["mcnemar_p"] == pytest.approx(58 / 128) and not significant_gain(row_a)
    all_flip = correct.copy()
    all_flip[:, A] = ~correct[:, ONE]  # every image discordant, 5 gained and 3 lost
    (flip,) = policy_rows({("max_conf", 2): always_a}, all_flip, ONE)
    assert (flip["n_right_to_wrong"], flip["n_wrong_to_right"], flip["mcnemar_p"]) == (3, 5, pytest.approx(0.7265625))
    strong = {"mcnemar_p": 0.01, "n_right_to_wrong": 0, "n_wrong_to_right": 9}
    assert significant_gain(strong) and not significant_gain({**strong, "n_right_to_wrong": 20})  # a loss is no gain
    assert not significant_gain({"mcnemar_p": None})
    # in the CSV: the 1-crop against itself, the oracle (never loses an image) and the 5-crop rule (no per-image data)
    files = write_files(tmp_path, "d", confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4))
    aggregation = {"five_crop": {"max": 62.5}}
    document = cv_document(*files, metrics("d", aggregation), PoliciesConfig(budgets=(1, 2), folds=2))
    write_table_zoom_policies([document], [], tmp_path / "t.csv", tmp_path / "t.md")
    with open(tmp_path / "t.csv", newline="") as fh:
        cells = {(c["policy"], c["budget"]): c for c in csv.DictReader(fh)}
    paired_cells = {k: (c["n_right_to_wrong"], c["n_wrong_to_right"], c["mcnemar_p"]) for k, c in cells.items()}
    assert paired_cells["one_crop", "1"] == ("0", "0", "1")
    assert paired_cells["oracle_max", "18"] == ("0", "4", "0.125")  # the 4 images only A solves: 2 / 16
    assert paired_cells["five_crop_max", "5"] == ("", "", "")
    assert "-0 +4 (p 0.125)" in (tmp_path / "t.md").read_text()


def test_references_take_the_aggregation_rules_from_the_metrics():
    views = confident_when_right([{ONE}, {A}, {ONE, B}, set()], 4)
    rows = reference_rows(views, [1, 2, 18], metrics("d", aggregation={"five_crop": {"max": 62.5, "mean": 50.0}}))
    five = {r["policy"]: (r["passes"], r["n_correct"]) for r in rows if r["policy"].startswith("five")}
    assert five == {"five_crop_max": (5.0, 10), "five_crop_mean": (5.0, 8)}
    top = {r["budget"]: r["acc"] for r in rows if r["policy"] == "oracle_top_k"}
    assert top == {1: 50.0, 2: 75.0, 18: 75.0}  # greedy: the 1-crop (8 images), then A (4 more)


def metrics(dataset: str, aggregation=None) -> Metrics:
    """The metrics fields a policies document reads."""
    return Metrics(
        n_images=0,
        acc_1crop=50.0,
        acc_top_k=0,
        acc_max=75.0,
        cover_size=0,
        cover_size_exact=0,
        cover_gap=0,
        zoom_groups={},
        top_k_centre_share=None,
        model="m",
        variant="original",
        dataset=dataset,
        n_transforms=18,
        n_classes=1000,
        n_excluded=0,
        by_origin=None,
        aggregation=aggregation,
        top_k=3,
    )


def write_files(folder: Path, dataset: str, views: P.Views) -> tuple[Path, Path]:
    """A correctness matrix and a prediction file of ``views`` in the workflow's formats."""
    folder.mkdir(parents=True, exist_ok=True)
    records = [Record(f"{dataset}{i}", f"{i}.png", [0], [""], 10, 10) for i in range(views.n_images)]
    write_matrix(folder / "correct.npz", views.correct.T, ORDER, records, 224)
    table = prediction_table(records, GRID, {"pred": views.pred, "pred_full": views.pred, "conf": views.conf})
    write_table(folder / "predictions.parquet", table, {"kind": "predictions", "scales": SCALES})
    return folder / "correct.npz", folder / "predictions.parquet"


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ({"transfer": [["demo", "nowhere"]]}, "policies.transfer[0]: 'nowhere' is not a scored dataset"),
        ({"transfer": [["demo", "demo"]]}, "policies.transfer[0]: source and target are both 'demo'"),
        ({"folds": 1}, "policies.folds: 1 is less than the minimum of 2"),
        ({"budgets": [0]}, "policies.budgets[0]: 0 is less than the minimum of 1"),
    ],
)
def test_the_policies_section_is_typed_and_bad_values_are_refused_naming_the_key(policies, message):
    from zoomeval.core.config import ConfigError
    from zoomeval.registries import load_config

    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = load_config({**demo, "policies": {"folds": 3, "transfer": [["demo", "demo_clutter"]]}}, check_paths=False)
    assert config.policies == PoliciesConfig(folds=3, transfer=(("demo", "demo_clutter"),))
    assert load_config(dict(demo), check_paths=False).policies.budgets == (1, 2, 4, 9, 18, 36, 72, 144, 324)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({**demo, "policies": policies}, check_paths=False)


def test_a_one_image_dataset_gets_its_references_and_its_policies_left_out_with_the_reason(tmp_path):
    """Before: its zoom_policies job failed (cross-validation needs at least 2 images, got 1), stopping `all` after
    every prediction was made. Now the references are scored and each policy's row is left out, saying why."""
    files = write_files(tmp_path, "d", confident_when_right([{ONE}], 1))
    nothing_left_out = replace(metrics("d"), left_out=LeftOut("d", {}, {}))
    document = cv_document(*files, nothing_left_out, PoliciesConfig(budgets=(1, 2), folds=5))
    assert document["not_fitted"] == "cross-validation needs at least 2 images, got 1"
    assert (document["protocol"], document["folds"], document["fitted"]) == ("cv5", [], [])
    assert {r["policy"] for r in document["rows"]} == {"one_crop", "oracle_top_k", "oracle_max"}
    write_table_zoom_policies([document], [], tmp_path / "t.csv", tmp_path / "t.md")
    with open(tmp_path / "t.csv", newline="") as fh:
        cells = list(csv.DictReader(fh))
    left = [c for c in cells if c["protocol"] == "cv5"]
    assert [c["policy"] for c in left] == list(P.POLICIES)
    assert {(c["budget"], c["acc"], c["gap_closed"], c["n_images"], c["n_unscored"], c["left_out"]) for c in left} == {
        ("", "", "", "0", "1", "1 not scored (cross-validation needs at least 2 images, got 1)")
    }
    one = next(c for c in cells if c["policy"] == "one_crop")
    assert (one["n_images"], one["acc"], one["n_unscored"], one["left_out"]) == ("1", "100.00", "0", "none")
    plot_zoom_policies([document], [], tmp_path / "f.png", "d")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
