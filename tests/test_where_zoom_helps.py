"""Where zoom helps: the size/centre table against a brute-force recount (hand-made boxes and the demo's), its
tie rule, the images left out for having no box, and the escaped table files."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from zoomeval.analysis.stats import wilson_interval
from zoomeval.analysis.where_zoom_helps import CENTRE_EDGES, NO_BOX, policy_correctness, where_zoom_helps
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP, Transform, transforms
from zoomeval.report.where_zoom_helps import COLUMNS, plot_where_zoom_helps, write_table_where_zoom_helps

ORDER = transforms([128, 256])
ONE = ORDER.index(Transform(*ONE_CROP))


def record(k: int, w: int, h: int, boxes: list[tuple[int, int, int, int]]) -> Record:
    return Record(f"im{k}", f"im{k}.png", [1], ["n0"], w, h, boxes)


def brute_decile(values: list[float], k: int) -> float:
    """Decile edge k by hand: the sorted values' element at floor((n - 1) k / 10)."""
    return sorted(values)[math.floor((len(values) - 1) * k / 10)]


def brute_force(
    records: list[Record], matrix: np.ndarray, one: int = ONE, policy: list[bool] | None = None
) -> list[tuple]:
    """Loop over the images: largest box (first of equals), its area fraction and centre distance by hand, the bin
    as the lowest k whose upper edge the value does not exceed, then count (``one``: the 1-crop's row; ``policy``:
    each image's correctness under a policy, None: not counted)."""
    geometry = {}
    for i, r in enumerate(records):
        best = None
        for x0, y0, x1, y1 in r.boxes:
            x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, r.width), min(y1, r.height)
            area = max(x1 - x0, 0) * max(y1 - y0, 0)
            if area > 0 and (best is None or area > best[0]):
                best = (area, (x0 + x1) / 2, (y0 + y1) / 2)
        if best is not None:
            d = math.sqrt((best[1] - r.width / 2) ** 2 + (best[2] - r.height / 2) ** 2)
            geometry[i] = (best[0] / (r.width * r.height), d / (math.sqrt(r.width**2 + r.height**2) / 2))
    sizes = [g[0] for g in geometry.values()]
    axes = {"size": [brute_decile(sizes, k) for k in range(11)], "centre": list(CENTRE_EDGES)}
    out = []
    for a, (axis, edges) in enumerate(axes.items()):
        for k in range(len(edges) - 1):
            members = [
                i for i, g in geometry.items() if min(j for j in range(len(edges) - 1) if g[a] <= edges[j + 1]) == k
            ]
            right = sum(bool(matrix[one, i]) for i in members)
            best = sum(bool(matrix[:, i].any()) for i in members)
            chosen = None if policy is None else sum(bool(policy[i]) for i in members)
            out.append((axis, k, len(members), right, best, chosen))
    return out


def table_counts(rows: list[dict]) -> list[tuple]:
    return [(r["axis"], r["bin"], r["n_images"], r["n_1crop"], r["n_max"], r["n_policy"]) for r in rows]


def named(rows: list[dict], policy: str | None = None, budget: int = 4) -> list[dict]:
    """The rows as read_cell gives them: with the best policy's name and budget."""
    return [{**r, "policy": policy, "budget": budget} for r in rows]


def random_case(records: list[Record], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random((len(ORDER), len(records))) < 0.15


def hand_records() -> list[Record]:
    """23 images of several sizes: many boxes, boxes partly outside, equal boxes, one image without a box and one
    whose only box lies outside it."""
    rng = np.random.default_rng(7)
    out = []
    for k in range(21):
        w, h = int(rng.integers(40, 120)), int(rng.integers(40, 120))
        boxes = []
        for _ in range(int(rng.integers(1, 4))):
            x0, y0 = int(rng.integers(-10, w - 5)), int(rng.integers(-10, h - 5))
            boxes.append((x0, y0, x0 + int(rng.integers(2, w)), y0 + int(rng.integers(2, h))))
        out.append(record(k, w, h, boxes))
    return [*out, record(21, 50, 50, []), record(22, 50, 50, [(60, 60, 70, 70)])]


def test_the_table_equals_a_brute_force_recount_on_hand_made_boxes() -> None:
    records = hand_records()
    matrix = random_case(records, 1)
    policy = np.random.default_rng(5).random(len(records)) < 0.5
    rows, no_box = where_zoom_helps(records, matrix, ORDER, [r.image_id for r in records], policy)
    assert no_box == 2
    assert table_counts(rows) == brute_force(records, matrix, policy=policy.tolist())
    assert table_counts(where_zoom_helps(records, matrix, ORDER, [r.image_id for r in records])[0]) == brute_force(
        records, matrix
    )
    assert sum(r["n_images"] for r in rows if r["axis"] == "size") == 21
    for r in rows:
        if r["n_images"]:
            assert r["acc_1crop"] == 100 * r["n_1crop"] / r["n_images"]
            low, high = wilson_interval(r["n_max"], r["n_images"])
            assert (r["acc_max_lo"], r["acc_max_hi"]) == (100 * low, 100 * high)
            low, high = wilson_interval(r["n_policy"], r["n_images"])
            assert (r["acc_policy"], r["acc_policy_lo"], r["acc_policy_hi"]) == (
                100 * r["n_policy"] / r["n_images"],
                100 * low,
                100 * high,
            )


def test_hand_computed_bins_and_the_tie_rule() -> None:
    """Two 100 x 100 images: a centred 50 x 50 box (size .25, distance 0) and, beside a smaller box, a 10 x 10 box
    at the top-left corner (size .01, distance sqrt(2) * 45 / (sqrt(2) * 50) = .9): the edges are .01 nine times
    then .25. Ties: four equal images all fall in the first decile."""
    records = [record(0, 100, 100, [(25, 25, 75, 75)]), record(1, 100, 100, [(0, 0, 5, 5), (0, 0, 10, 10)])]
    matrix = np.zeros((len(ORDER), 2), dtype=bool)
    matrix[ONE, 0] = True
    matrix[0, 1] = True  # image 1: right only off the 1-crop view
    rows, _ = where_zoom_helps(records, matrix, ORDER, ["im0", "im1"])
    size = {r["bin"]: r for r in rows if r["axis"] == "size"}
    assert (size[0]["lo"], size[9]["hi"]) == (0.01, 0.25)
    assert [(k, r["n_images"], r["n_1crop"], r["n_max"]) for k, r in size.items() if r["n_images"]] == [
        (0, 1, 0, 1),
        (9, 1, 1, 1),
    ]
    centre = {r["bin"]: r for r in rows if r["axis"] == "centre"}
    assert [centre[k]["n_images"] for k in range(4)] == [1, 0, 0, 1]
    assert centre[3]["acc_1crop"] == 0.0 and centre[3]["acc_max"] == 100.0 and centre[1]["acc_max"] is None
    same = [record(k, 100, 100, [(25, 25, 75, 75)]) for k in range(4)]
    rows, _ = where_zoom_helps(same, np.ones((len(ORDER), 4), bool), ORDER, [r.image_id for r in same])
    assert [r["n_images"] for r in rows if r["axis"] == "size"] == [4] + [0] * 9


def test_the_table_equals_a_brute_force_recount_on_the_demo(tmp_path) -> None:
    from zoomeval.datasets.adapters.demo import build_demo

    records = build_demo(tmp_path)
    matrix = random_case(records, 2)
    policy = np.random.default_rng(4).random(len(records)) < 0.6
    rows, no_box = where_zoom_helps(records, matrix, ORDER, [r.image_id for r in records][::-1], policy)
    assert no_box == 0
    assert table_counts(rows) == brute_force(records[::-1], matrix, policy=policy.tolist())


def test_a_dataset_without_a_box_keeps_its_bins_empty_and_counts_every_image(tmp_path) -> None:
    records = [record(0, 10, 10, []), record(1, 10, 10, [(20, 20, 30, 30)])]
    rows, no_box = where_zoom_helps(records, np.ones((len(ORDER), 2), bool), ORDER, ["im0", "im1"])
    assert no_box == 2 and len(rows) == 14 and {r["n_images"] for r in rows} == {0}
    assert {(r["lo"], r["hi"], r["acc_max"]) for r in rows if r["axis"] == "size"} == {(None, None, None)}
    plot_where_zoom_helps([("m", "d", None, named(rows), no_box)], tmp_path / "f.png", "none")  # nothing to plot
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_refusals() -> None:
    records = [record(0, 10, 10, [(0, 0, 5, 5)])]
    with pytest.raises(ValueError, match="not in the manifest"):
        where_zoom_helps(records, np.ones((len(ORDER), 1), bool), ORDER, ["other"])
    with pytest.raises(ValueError, match="1-crop transform"):
        where_zoom_helps(records, np.ones((1, 1), bool), [Transform(128, 0, 0)], ["im0"])
    with pytest.raises(ValueError, match="shape"):
        where_zoom_helps(records, np.ones((len(ORDER), 2), bool), ORDER, ["im0"])


def test_the_table_files_escape_cells_and_count_the_images_without_a_box(tmp_path) -> None:
    records = [record(0, 100, 100, [(25, 25, 75, 75)]), record(1, 100, 100, [])]
    rows, no_box = where_zoom_helps(records, np.ones((len(ORDER), 2), bool), ORDER, ["im0", "im1"], [False, True])
    left = LeftOut("demo", {"unreadable": 1}, {})
    unfitted, _ = where_zoom_helps(records, np.ones((len(ORDER), 2), bool), ORDER, ["im0", "im1"])
    cells = [("=cmd|x", "demo", left, named(rows, "vote"), no_box), ("m", "d", None, named(unfitted), no_box)]
    write_table_where_zoom_helps(cells, tmp_path / "t.csv", tmp_path / "t.md")
    with open(tmp_path / "t.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == [*COLUMNS, "n_bad", "n_unscored", "left_out"] and len(table) == 28
    assert [table[0][c] for c in ("policy", "budget", "n_policy", "acc_policy", "acc_policy_lo")] == [
        "vote",
        "4",
        "0",
        "0.00",
        "0.00",
    ]
    assert [table[14][c] for c in ("policy", "budget", "n_policy", "acc_policy")] == ["", "4", "", ""]
    assert table[0]["model"] == "'=cmd|x" and (table[0]["n_images"], table[0]["acc_max"]) == ("1", "100.00")
    assert (table[0]["n_bad"], table[0]["n_unscored"]) == ("1", "1") and NO_BOX in table[0]["left_out"]
    assert table[1]["acc_1crop"] == "" and table[9]["lo"] == "0.250000" and table[0]["acc_max_lo"] == "20.65"
    md = (tmp_path / "t.md").read_text()
    assert "=cmd\\|x" in md and "Schema version 2" in md


def test_the_figure_is_drawn_with_empty_bins_and_the_same_bytes_twice(tmp_path) -> None:
    records = hand_records()
    policy = np.arange(len(records)) % 3 == 0
    rows, no_box = where_zoom_helps(records, random_case(records, 3), ORDER, [r.image_id for r in records], policy)
    rows[11]["n_images"] = 0  # an empty centre band is left out of the lines, not drawn at None
    cells = [("a", "hand", None, named(rows, "cascade"), no_box), ("b", "hand", None, named(rows), no_box)]
    plot_where_zoom_helps(cells, tmp_path / "a.png", "hand")
    plot_where_zoom_helps(cells, tmp_path / "b.png", "hand")
    data = (tmp_path / "a.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000 and data == (tmp_path / "b.png").read_bytes()


def test_the_policys_correctness_is_put_in_the_matrixs_image_order_and_other_images_are_refused() -> None:
    best = ("vote", np.array(["b", "c", "a"], dtype=object), np.array([True, False, False]))
    assert policy_correctness(best, ["a", "b", "c"]).tolist() == [False, True, False]
    assert policy_correctness(None, ["a"]) is None
    with pytest.raises(ValueError, match="hold 3 image"):
        policy_correctness(best, ["a", "b", "d"])
    with pytest.raises(ValueError, match="hold 3 image"):
        policy_correctness(best, ["a", "b"])
