"""Masks, object counts and the Mann-Whitney test through the workflow (no inference needed)."""

import csv
import os
import re

import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from scipy.stats import mannwhitneyu

from zoomeval.core.io import read_metadata
from zoomeval.masks.boxes import decode_mask
from zoomeval.masks.sam import build_tiny_sam

pytestmark = pytest.mark.workflow


def test_demo_default_mann_whitney_on_box_counts(demo_study):
    """Read from the shared demo study (tests/conftest.py): config/config.yaml's datasets and statistics."""
    demo = [1] * 9 + [2, 3, 2]  # the scene table: nine single objects, then 2, 3 and 2
    clutter = [3, 4, 5, 6, 3, 4, 5, 6]
    counts = pq.read_table(demo_study / "results/stats/object_counts/demo.parquet")
    assert counts["n_objects"].to_pylist() == demo and set(counts["method"].to_pylist()) == {"bbox"}
    with open(demo_study / "results/stats/mannwhitney.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    expected = mannwhitneyu(demo, clutter, alternative="two-sided")
    assert (row["dataset1"], row["dataset2"], row["n1"], row["n2"]) == ("demo", "demo_clutter", "12", "8")
    assert float(row["U"]) == pytest.approx(expected.statistic)
    assert float(row["p_value"]) == pytest.approx(expected.pvalue, rel=1e-5)
    assert float(row["rank_biserial"]) == pytest.approx(2 * expected.statistic / (12 * 8) - 1, abs=1e-4)
    with Image.open(demo_study / "results/stats/object_counts.png") as img:
        assert img.width > 100 and img.height > 100


def test_sam_masks_counts_and_contact_sheets_end_to_end(tmp_path, snakemake_run, config_writer):
    torch.manual_seed(0)
    checkpoint = tmp_path / "tiny_sam.pth"
    torch.save(build_tiny_sam().state_dict(), checkpoint)
    config = config_writer(tmp_path)
    config["datasets"]["demo"]["mask_method"] = "sam_box"
    config["datasets"]["demo_clutter"]["count_method"] = "sam_auto"
    config["sam"] = {
        "model_type": "tiny",
        "checkpoint": {"path": str(checkpoint)},
        "device": "cpu",
        "counting": {"min_iou": 0.0, "min_stability": 0.0, "min_area_fraction": 0.0, "max_overlap": 0.9},
        "generator": {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0},
    }
    config_writer(tmp_path, **config)
    targets = ["results/masks/demo/sam_box_contact_sheet.png", "results/stats/mannwhitney.csv"]
    snakemake_run(tmp_path, *targets)
    masks = pq.read_table(tmp_path / "results/masks/demo/sam_box.parquet")
    assert masks.num_rows == 12 and set(masks["method"].to_pylist()) == {"sam_box"}
    assert decode_mask(masks["mask_png"][0].as_py()).shape == (480, 640)
    assert [len(s) for s in masks["scores"].to_pylist()][9:] == [2, 3, 2]  # one score per box prompt
    from zoomeval.core.checksums import sha256_file

    assert read_metadata(tmp_path / "results/masks/demo/sam_box.parquet")["checkpoint_sha256"] == sha256_file(
        checkpoint
    )
    counts = pq.read_table(tmp_path / "results/stats/object_counts/demo_clutter.parquet")
    assert set(counts["method"].to_pylist()) == {"sam_auto"} and counts.num_rows == 8
    with Image.open(tmp_path / "results/masks/demo/sam_box_contact_sheet.png") as img:
        assert img.width > 400
    # FGSet/BGSet inference would read the SAM mask file
    plan = snakemake_run(tmp_path, "results/predictions/demo/fgset/efficientnet_lite0.parquet", "--dry-run")
    assert "results/masks/demo/sam_box.parquet" in plan.stdout + plan.stderr
    # a checkpoint replaced at its path by an older file (mv keeps its mtime) reruns the masks: its sha256 is a param
    torch.manual_seed(1)
    new = tmp_path / "new_sam.pth"
    torch.save(build_tiny_sam().state_dict(), new)
    os.utime(new, (0, 0))
    os.replace(new, checkpoint)
    plan = snakemake_run(tmp_path, *targets, "--dry-run")
    out = plan.stdout + plan.stderr
    assert re.search(r"^sam_masks +2$", out, re.MULTILINE), out  # Job stats: both mask files again
