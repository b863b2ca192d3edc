"""zoomeval.Study's class names and standard-evaluation rows, and several studies in one frame whose groups' headings
say in words what separates them (the leaderboard's headings too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl

from tests.test_leaderboard import study
from tests.test_reader import make_study

BASE = "demo / original / in: 12 images, 3 scales, top_k 3"


def test_predictions_and_classes_carry_wnids_and_english_names(tmp_path: Path) -> None:
    from zoomeval import Study

    toy = Study(make_study(tmp_path))
    classes = toy.classes()
    assert classes.height == 1000 and classes.row(998) == (998, "n13133613", "ear, spike, capitulum")
    frame = toy.class_predictions("toy", "original", "m").collect()
    assert frame.columns[:7] == ["image_id", "scale", "row", "col", "transform", "name", "pred"]
    named = frame.select("pred", "pred_wnid", "pred_name", "pred_full_name").unique().sort("pred").rows()
    assert named == [
        (0, "n01440764", "tench, Tinca tinca", "tench, Tinca tinca"),
        (1, "n01443537", "goldfish, Carassius auratus", "goldfish, Carassius auratus"),
        (5, "n01496331", "electric ray, crampfish, numbfish, torpedo", "electric ray, crampfish, numbfish, torpedo"),
    ]
    assert frame.height == 2 * 9 * 2  # the names add columns, never rows


def test_the_standard_evaluation_per_image_scores_acc_standard(tmp_path: Path) -> None:
    from zoomeval import Study

    rows = Study(study(tmp_path / "a")).standard("demo", "r50")
    # the fixture's standard evaluation is right (its label i % 4) on the images i with i % 3 == 0, else says 998
    assert rows["image_id"].to_list() == [f"i{i:02d}" for i in range(12)]
    assert rows.filter("correct")["image_id"].to_list() == ["i00", "i03", "i06", "i09"]
    assert rows.filter(image_id="i03").select("pred", "pred_name", "labels").row(0) == (
        3,
        "tiger shark, Galeocerdo cuvieri",
        [3],
    )
    assert set(rows.filter(~pl.col("correct"))["pred_name"]) == {"ear, spike, capitulum"}
    assert rows["top5"].to_list()[1] == [998, 997, 1, 995, 994]  # image 1 is odd: its label third in the top 5


def test_studies_in_one_frame_are_grouped_by_protocol_with_headings_in_words(tmp_path: Path) -> None:
    import zoomeval

    a = study(tmp_path / "a")
    b = study(tmp_path / "b", spec={"weights_sha256": "cd" * 32})  # other weights: a model setting, a's table
    c = study(tmp_path / "c", scales=[64, 224, 448])
    d = study(tmp_path / "d")  # a's config again
    frame = zoomeval.compare_studies(a, b, c, d)
    assert frame.height == 4 and frame["key_sha256"].n_unique() == 3
    groups = dict(zip(frame["study"], frame["group"], strict=True))
    # a's protocol is one field from c's (the scales): its heading names it, in words, and c's names a's
    assert groups["a"] == groups["b"] == groups["d"] == f"{BASE} — scales 64–256 (not 64–448)"
    assert groups["c"] == f"{BASE} — scales 64–448 (not 64–256)"
    assert frame.filter(study="a")["acc_1crop"].item() == frame.filter(study="d")["acc_1crop"].item()
    # the leaderboard's headings are the same words
    board = subprocess.run(
        [sys.executable, "-m", "zoomeval", "leaderboard", *map(str, (a, b, c))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    headings = [line for line in board.splitlines() if line.startswith("## ")]
    assert headings == [f"## {groups[s]}" for s in "ac"]
