"""Weights are kept by content, never by name alone (the tiny random-initialised open_clip model on the demo): two
models whose local checkpoints share a ``weights`` name each get their own weights and head, and a checkpoint
replaced at the same path (by ``mv``, which keeps the new file's older mtime) reruns the fetch, the head and the
predictions, whose metadata then records the new file's sha256."""

import os

import pytest

from tests.test_open_clip import write_tiny_clip
from tests.test_zero_shot_workflow import job_counts
from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import read_metadata

pytestmark = pytest.mark.workflow
PREDICTIONS = "results/predictions/demo/original/{}.parquet"


def write_config(tmp_path, config_writer, models):
    config_writer(
        tmp_path,
        scales=[64],
        top_k=1,
        datasets={"demo": {"adapter": "demo", "variants": ["original"]}},
        models=models,
        stats={"pairs": []},
    )


def recorded(tmp_path, model: str) -> tuple[str, str]:
    """The weights sha256 and the head's weights sha256 that a model's prediction file records."""
    record = read_metadata(tmp_path / PREDICTIONS.format(model))["model"]
    return record["weights_sha256"], record["zero_shot"]["weights_sha256"]


def test_two_checkpoints_under_one_weights_name_keep_their_own_weights(tmp_path, snakemake_run, config_writer):
    a, b = write_tiny_clip(tmp_path / "a", seed=0), write_tiny_clip(tmp_path / "b", seed=1)
    sha_a, sha_b = sha256_file(a["checkpoint"]), sha256_file(b["checkpoint"])
    assert a["weights"] == b["weights"] == "tiny" and sha_a != sha_b
    write_config(tmp_path, config_writer, {"clip_a": a, "clip_b": b})

    run = snakemake_run(tmp_path, PREDICTIONS.format("clip_a"), PREDICTIONS.format("clip_b"))

    counts = job_counts(run)
    assert (counts["fetch_weights"], counts["zero_shot_head"], counts["predict"]) == (2, 2, 2)
    assert recorded(tmp_path, "clip_a") == (sha_a, sha_a)
    assert recorded(tmp_path, "clip_b") == (sha_b, sha_b)


def test_a_checkpoint_replaced_at_its_path_reruns_the_head_and_the_predictions(tmp_path, snakemake_run, config_writer):
    entry = write_tiny_clip(tmp_path / "clip", seed=0)
    path = entry["checkpoint"]
    new = write_tiny_clip(tmp_path / "new", seed=1)["checkpoint"]
    old_time = os.stat(path).st_mtime - 60
    os.utime(new, (old_time, old_time))  # written before the first run, as a download kept elsewhere would be
    write_config(tmp_path, config_writer, {"clip": entry})
    target = PREDICTIONS.format("clip")
    snakemake_run(tmp_path, target)
    assert recorded(tmp_path, "clip") == (sha256_file(path),) * 2

    os.replace(new, path)  # mv new.safetensors tiny.safetensors
    run = snakemake_run(tmp_path, target)

    assert "Nothing to be done" not in run.stderr
    counts = job_counts(run)
    assert (counts["fetch_weights"], counts["zero_shot_head"], counts["predict"]) == (1, 1, 1)
    assert recorded(tmp_path, "clip") == (sha256_file(path),) * 2
    assert "Nothing to be done" in snakemake_run(tmp_path, target).stderr  # and a third run reruns nothing
