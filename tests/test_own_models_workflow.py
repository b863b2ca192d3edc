"""Every local-weights route reaches Table A8 with ``acc_standard``, offline: a torchvision ``checkpoint``, a timm
architecture's safetensors file and a model from an installed package's entry point, each with random-init weights on
disk, in one small study (the demo's 12 images, one scale) whose standard evaluation is recomputed by hand with each
library's own transform, and which ``zoomeval leaderboard`` ranks as one table; and ``zoomeval run``'s preflight
refuses their faults before any job."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import timm
import torch
import torchvision
import yaml
from safetensors.torch import load_file
from timm.data import create_transform, resolve_data_config
from torchvision import transforms as T

from tests.conftest import LAYOUT, run_snakemake, write_config
from tests.own_models_fixture import SOURCE, TIMM_ARCH, TORCHVISION_ARCH, model_entries, tiny_module
from tests.test_standard_eval import by_hand
from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import read_manifest

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_own_models_workflow")

TABLE_A8 = LAYOUT.path("table_a8", ext="csv")
ACCURACIES = ("acc_1crop", "acc_top_k", "acc_max", "acc_standard")


def with_site(site: Path) -> dict[str, str]:
    """The environment with the fixture distribution on PYTHONPATH (as if pip had installed it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, dict]:
    """One Snakemake run of Table A8 and the study's seal for the three routes' models (about 2 minutes on 2 busy
    cores)."""
    workdir = tmp_path_factory.mktemp("own_models")
    models = model_entries(workdir / "files")
    write_config(
        workdir,
        scales=[256],
        top_k=3,
        datasets={"demo": {"adapter": "demo", "variants": ["original"]}},
        models=models,
        stats={"pairs": []},
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", with_site(workdir / "files" / "site")["PYTHONPATH"])
        run_snakemake(workdir, TABLE_A8, LAYOUT.path("study_index"))
    return workdir, models


def oracles(files: Path) -> dict[str, tuple[torch.nn.Module, object]]:
    """Each model built by hand from its file, with its library's full evaluation transform (to-tensor and
    normalisation included); the entry point's logits placed in reverse, as its class order says."""
    ckpt = torchvision.models.get_model(TORCHVISION_ARCH)
    state = torch.load(files / "ckpt.pth.tar", weights_only=True)["state_dict"]
    ckpt.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    preset = torchvision.models.get_model_weights(TORCHVISION_ARCH)["IMAGENET1K_V1"].transforms()
    timm_model = timm.create_model(TIMM_ARCH)
    timm_model.load_state_dict(load_file(files / "timm.safetensors"))
    own = tiny_module()
    own.load_state_dict(torch.load(files / "own.pth", weights_only=True))
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)  # noqa: S102 (the fixture's own source): its TRANSFORM
    reversed_order = torch.nn.Sequential(own, Flip())
    return {
        "ckpt": (ckpt.eval(), preset),
        "timm_file": (timm_model.eval(), create_transform(**resolve_data_config({}, model=timm_model))),
        "own": (reversed_order.eval(), namespace["TRANSFORM"]),
    }


class Flip(torch.nn.Module):
    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.flip(1)


@pytest.mark.workflow
def test_each_route_reaches_table_a8_with_the_standard_accuracy_of_its_own_transform(study, monkeypatch) -> None:
    workdir, models = study
    monkeypatch.chdir(workdir)  # the manifest's image paths are the study's
    with open(TABLE_A8) as fh:
        rows = {r["model"]: r for r in csv.DictReader(fh)}
    assert sorted(rows) == ["ckpt", "own", "timm_file"]
    records = read_manifest(LAYOUT.path("manifest", dataset="demo"))
    assert len(records) == 12
    built = oracles(workdir / "files")
    for name, (module, transform) in built.items():
        standard = pl.read_parquet(LAYOUT.path("standard", dataset="demo", model=name))
        pred, conf = by_hand(module, transform, records)
        assert standard["pred"].to_list() == pred, name
        np.testing.assert_allclose(standard["conf"].to_numpy(), conf, rtol=1e-4, err_msg=name)
        correct = [p in r.labels for p, r in zip(pred, records, strict=True)]
        assert rows[name]["acc_standard"] == f"{100 * np.mean(correct):.2f}", name
        assert rows[name]["n_images"] == "12" and rows[name]["acc_1crop"] != "", name
    # the transform matters: torchvision's reference evaluation gives the timm model other confidences
    module, _ = built["timm_file"]
    norm = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    _, reference = by_hand(module, T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm]), records)
    assert not np.allclose(
        pl.read_parquet(LAYOUT.path("standard", dataset="demo", model="timm_file"))["conf"], reference, rtol=1e-4
    )


@pytest.mark.workflow
def test_the_leaderboard_ranks_the_three_models_in_one_table_with_table_a8s_values(study, tmp_path) -> None:
    """Three models of one protocol: one table, three rows, best acc_max first (then acc_1crop), each row's
    accuracies those of the study's Table A8."""
    workdir, _ = study
    out = tmp_path / "board.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "zoomeval", "leaderboard", str(workdir), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    with open(out) as fh:
        board = list(csv.DictReader(fh))
    with open(workdir / TABLE_A8) as fh:
        table = {r["model"]: r for r in csv.DictReader(fh)}
    assert len({r["group"] for r in board}) == 1 and sorted(r["model"] for r in board) == sorted(table)
    for row in board:
        assert [row[a] for a in ACCURACIES] == [table[row["model"]][a].split(" ")[0] for a in ACCURACIES], row["model"]
    ranked = sorted(board, key=lambda r: (-float(r["acc_max"]), -float(r["acc_1crop"]), r["model"]))
    assert [r["model"] for r in board] == [r["model"] for r in ranked]
    assert all(r["note"] == "" for r in board)


@pytest.mark.workflow
def test_the_metadata_records_the_transform_the_pinned_weights_and_the_entry_point(study) -> None:
    workdir, models = study
    geometry = {
        "ckpt": {"img_size": 224, "crop_pct": 0.875, "interpolation": "bilinear"},  # IMAGENET1K_V1's preset
        "timm_file": {"img_size": 160, "crop_pct": 0.95, "interpolation": "bicubic"},  # test_efficientnet's config
        "own": {"img_size": 64, "crop_pct": round(64 / 72, 4), "interpolation": "bicubic"},  # the fixture's
    }
    for name, expected in geometry.items():
        standard = read_metadata(workdir / LAYOUT.path("standard", dataset="demo", model=name))
        predictions = read_metadata(
            workdir / LAYOUT.path("predictions", dataset="demo", variant="original", model=name)
        )
        assert standard["geometry"] == expected, name
        assert standard["model"]["weights_sha256"] == predictions["model"]["weights_sha256"] == models[name]["weights"]
    own = read_metadata(workdir / LAYOUT.path("predictions", dataset="demo", variant="original", model="own"))
    assert own["model"]["entry_point"] == {
        "name": "tiny_net",
        "value": "zoomeval_tiny_models:tiny_net",
        "distribution": "zoomeval-tiny-models",
        "version": "0.1",
    }
    assert (own["crop_size"], own["model"]["mean"], own["model"]["std"]) == (64, [0.5] * 3, [0.25] * 3)


def test_the_preflight_names_a_wrong_sha256_an_unknown_entry_point_and_a_missing_file_one_line_each(tmp_path) -> None:
    models = model_entries(tmp_path / "files")
    actual, ckpt = models["ckpt"]["weights"], models["ckpt"]["checkpoint"]
    models["ckpt"]["weights"] = "1" * 64
    models["own"]["architecture"] = "tiny_nte"
    models["timm_file"]["checkpoint"] = str(tmp_path / "missing.safetensors")
    env = with_site(tmp_path / "files" / "site")
    zoomeval = [sys.executable, "-m", "zoomeval"]
    assert subprocess.run([*zoomeval, "init", "study"], cwd=tmp_path, env=env, capture_output=True).returncode == 0
    config = tmp_path / "study" / "config" / "config.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "models": models}))
    proc = subprocess.run([*zoomeval, "run", "study"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"zoomeval run: models.timm_file.checkpoint: '{tmp_path}/missing.safetensors' does not exist; download it and "
        "point the key at it, or give a url",
        f"zoomeval run: models.ckpt.weights: {ckpt}: sha256 {actual} does not match {'1' * 64} (pinned in "
        "models.ckpt.weights); the file is corrupt or was replaced, so its weights are not the published ones: point "
        "models.ckpt.checkpoint at the checkpoint you verified, or verify this one (its authors publish no checksum) "
        "and pin its sha256 in models.ckpt.weights",
        "zoomeval run: models.own.architecture: 'tiny_nte' is no entry point of group zoomeval.models (zoomeval list "
        "models entry_point); closest: tiny_net, tiny_subset",
        "zoomeval run: 3 problem(s) found before starting; nothing was run",
    ]
    assert not (tmp_path / "study" / "logs").exists()
