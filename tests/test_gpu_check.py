"""bench/gpu_check.sh on the CPU with tiny settings: the script that will run on a GPU machine works, and its
figures are consistent with each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_gpu_check_cpu_smoke(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHON": sys.executable}
    command = [str(ROOT / "bench" / "gpu_check.sh"), "--cpu-smoke", "--models", "resnet18", "--out", str(out)]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["scales"] == [256] and report["images"] == 2
    assert report["max_abs_pixel_diff"] <= 2
    model = report["models"]["resnet18"]
    assert set(model["model_alone"]) == {"fp32", "bf16"} and min(model["model_alone"].values()) > 0
    assert model["end_to_end_setting"] == "bf16" and model["gpu_utilisation"] is None
    # 50,000 images x (9 crops + 9 aggregation views at S=256) at the measured rate
    assert (
        abs(model["imagenet_val_minutes"] - 50_000 * 18 / model["end_to_end"] / 60)
        <= 0.1 + 0.01 * model["imagenet_val_minutes"]
    )
    assert abs(model["end_to_end_over_model"] - model["end_to_end"] / model["model_alone"]["bf16"]) < 0.01
    assert "ImageNet val x 18 views" in run.stdout
