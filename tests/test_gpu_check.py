"""bench/gpu_check.sh on the CPU with tiny settings: the script that will run on a GPU machine works, and its
figures are consistent with each other."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

#: Views per image of the smoke run's projection: 9 crops + 9 aggregation views at S=256.
VIEWS = 18


def _interval(value: float, digits: int) -> tuple[float, float]:
    """The values that ``round(x, digits)`` turns into ``value`` (with a margin for float error)."""
    half = 0.5 * 10.0**-digits + 1e-9
    return value - half, value + half


def consistent(model: dict) -> bool:
    """Whether the rounded figures gpu_check.py writes can come from one unrounded end-to-end rate: the projected
    minutes are 50,000 x VIEWS / rate / 60 rounded to 0.1, the ratio rate / (the rounded model-alone rate) rounded
    to 0.001, for some rate that rounds to the written end_to_end (0.1). Holds at any machine speed."""
    low, high = _interval(model["end_to_end"], 1)
    work = 50_000 * VIEWS / 60
    minutes_low, minutes_high = _interval(model["imagenet_val_minutes"], 1)
    # minutes decrease with the rate: the rates that give the written minutes are [work / high, work / low]
    rates_low, rates_high = work / minutes_high, work / minutes_low if minutes_low > 0 else math.inf
    best = model["model_alone"][model["end_to_end_setting"]]
    ratio_low, ratio_high = _interval(model["end_to_end_over_model"], 3)
    return max(low, rates_low, ratio_low * best) <= min(high, rates_high, ratio_high * best)


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(0.94, True), (0.9, True), (1234.56, True), (0.05, True), (0.94 * 1.02, True), ("skewed", False)],
)
def test_the_consistency_check_accepts_any_rate_and_refuses_a_projection_from_another_rate(rate, expected):
    """Figures written as gpu_check.py writes them from an unrounded rate pass at any speed; 0.94 crops/s (written
    0.9) failed the earlier check against the rounded rate with a 1% tolerance (it is 4.4% off)."""
    best = 3.0
    true = 0.94 if rate == "skewed" else rate
    model = {
        "end_to_end_setting": "bf16",
        "model_alone": {"bf16": best},
        "end_to_end": round(true, 1),
        "end_to_end_over_model": round(true / best, 3),
        "imagenet_val_minutes": round(50_000 * VIEWS / (true * 1.05 if rate == "skewed" else true) / 60, 1),
    }
    assert consistent(model) is expected


def test_gpu_check_cpu_smoke(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHON": sys.executable}
    command = [str(ROOT / "bench" / "gpu_check.sh"), "--cpu-smoke", "--models", "resnet18", "--out", str(out)]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["scales"] == [256] and report["images"] == 2
    assert report["max_abs_pixel_diff"] == {"fused": 0, "plain": 0}  # fused: in Triton's interpreter
    model = report["models"]["resnet18"]
    assert set(model["model_alone"]) == {"fp32", "bf16"} and min(model["model_alone"].values()) > 0
    assert model["end_to_end_setting"] == "bf16" and model["gpu_utilisation"] is None
    assert set(report["device_crops_per_image"]) == set(model["device_crops_over_model"]) == {"frequent", "large"}
    # 50,000 images x 18 views at the measured rate, and the rate over the model alone's, from one rate
    assert consistent(model), model
    assert "ImageNet val x 18 views" in run.stdout


def test_gpu_check_stopped_early_keeps_the_figures_it_measured(tmp_path):
    """Stopped (SIGTERM, as `timeout` stops it) once its first figure is written: the JSON is complete JSON with
    that figure."""
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHON": sys.executable}
    command = [str(ROOT / "bench" / "gpu_check.sh"), "--cpu-smoke", "--models", "resnet18", "--out", str(out)]
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not out.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        run.terminate()
        run.wait(timeout=60)
    report = json.loads(out.read_text())
    assert report["max_abs_pixel_diff"]["fused"] == 0 and report["scales"] == [256]
    assert report["image_sizes"] == {"frequent": 1, "other": 0, "large": 1}
