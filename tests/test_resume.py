"""A local run killed with SIGKILL while predict is writing its shards leaves no partial output under a final
name, and a rerun resumes from the finished shards to the same tables as an uninterrupted run."""

import csv
import json
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import (
    SMALL_PREDICT_LOG,
    SMALL_PREDICTIONS,
    SMALL_SHARD_IMAGES,
    SMALL_TARGETS,
    run_snakemake,
    snakemake_command,
    write_small_config,
)
from zoomeval.core.manifest import read_manifest

pytestmark = pytest.mark.workflow

PRED_COLUMNS = ["image_id", "scale", "row", "col", "pred", "pred_full", "conf"]


def start_snakemake(workdir: Path, *args: str) -> subprocess.Popen:
    """Snakemake on the small demo in its own session (process group), output in ``workdir/controller.log``."""
    cmd = snakemake_command(workdir, *args, *SMALL_TARGETS)
    with open(workdir / "controller.log", "w") as out:
        return subprocess.Popen(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def shard_dir(workdir: Path) -> Path:
    final = workdir / SMALL_PREDICTIONS
    return final.with_name(f".{final.name}.shards")


def finished_shards(workdir: Path) -> list[str]:
    """Names of the prediction shards written under their final name (not the hidden temporary files); each
    is written after its aggregates shard, so its pair is complete."""
    return sorted(p.name for p in shard_dir(workdir).glob("[0-9][0-9][0-9][0-9][0-9].parquet"))


def wait_for_first_shard(workdir: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not finished_shards(workdir):
        if proc.poll() is not None:
            raise AssertionError(
                f"snakemake ended ({proc.returncode}) before the first shard:\n"
                + (workdir / "controller.log").read_text()[-5000:]
            )
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"no shard after {timeout} s:\n" + (workdir / "controller.log").read_text()[-5000:])
        time.sleep(0.05)


def n_shards(reference: Path) -> int:
    return math.ceil(len(read_manifest(reference / "results/datasets/demo/manifest.parquet")) / SMALL_SHARD_IMAGES)


def assert_no_partial_outputs(workdir: Path) -> None:
    """Every file under results/ with a final name reads completely; temporary files are hidden or in .shards."""
    checked = 0
    for path in (workdir / "results").rglob("*"):
        parts = path.relative_to(workdir).parts
        if path.is_dir() or any(p.startswith(".") for p in parts):
            continue
        assert not path.name.endswith(".tmp"), path
        if path.suffix == ".parquet":
            assert pq.read_table(path).num_rows > 0, path
        elif path.suffix == ".csv":
            with open(path, newline="") as fh:
                rows = list(csv.reader(fh))
            assert rows and rows[0], path  # at least a header
        elif path.suffix == ".json":
            json.loads(path.read_text())
        else:
            continue
        checked += 1
    assert checked >= 2, "expected at least the manifest and bad_images.csv"  # outputs before predict


def assert_resumed_like_the_reference(workdir: Path, reference: Path, finished: list[str]) -> None:
    """The rerun's predict log reused exactly the finished shards and computed the others; same outputs."""
    log = (workdir / SMALL_PREDICT_LOG).read_text()
    reused = sorted(Path(p).name for p in re.findall(r"reusing (\S+\.parquet)", log))
    assert reused == finished, log
    computed = re.findall(r"\(shard \d+ computed\)", log)  # the progress line that ends each computed shard
    assert len(computed) == n_shards(reference) - len(finished), log
    assert not shard_dir(workdir).exists()
    resumed = pq.read_table(workdir / SMALL_PREDICTIONS, columns=PRED_COLUMNS)
    assert resumed.equals(pq.read_table(reference / SMALL_PREDICTIONS, columns=PRED_COLUMNS))
    aggregates = SMALL_PREDICTIONS.replace(".parquet", ".aggregates.parquet")
    assert pq.read_table(workdir / aggregates).equals(pq.read_table(reference / aggregates))
    for target in SMALL_TARGETS:
        assert (workdir / target).read_bytes() == (reference / target).read_bytes(), target


def test_sigkill_during_predict_leaves_no_partial_output_and_the_rerun_reuses_finished_shards(
    tmp_path, small_reference
):
    write_small_config(tmp_path)
    proc = start_snakemake(tmp_path)
    wait_for_first_shard(tmp_path, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # snakemake, the predict job and its DataLoader worker
    assert proc.wait(timeout=30) == -signal.SIGKILL
    time.sleep(0.5)  # let the kernel finish off the rest of the process group
    finished = finished_shards(tmp_path)
    assert 1 <= len(finished) < n_shards(small_reference), finished
    assert not (tmp_path / SMALL_PREDICTIONS).exists()
    assert not any((tmp_path / "results").rglob("metrics.json"))
    assert_no_partial_outputs(tmp_path)

    locked = run_snakemake(tmp_path, *SMALL_TARGETS, check=False)  # the killed run's lock is still there
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    run_snakemake(tmp_path, "--unlock")
    run_snakemake(tmp_path, *SMALL_TARGETS)
    assert_resumed_like_the_reference(tmp_path, small_reference, finished)


def test_a_predict_job_orphaned_by_killing_only_snakemake_makes_the_rerun_refuse_until_it_is_killed(
    tmp_path, small_reference
):
    write_small_config(tmp_path)
    proc = start_snakemake(tmp_path)
    try:
        wait_for_first_shard(tmp_path, proc)
        os.kill(proc.pid, signal.SIGKILL)  # only snakemake: its predict job keeps running
        assert proc.wait(timeout=30) == -signal.SIGKILL
        holder = (shard_dir(tmp_path) / "lock").read_text()
        pid = int(re.fullmatch(r"pid (\d+) on \S+", holder)[1])
        os.kill(pid, signal.SIGSTOP)  # hold the orphan mid-run, so that it cannot finish before the rerun starts
        finished = finished_shards(tmp_path)
        run_snakemake(tmp_path, "--unlock")
        rerun = run_snakemake(tmp_path, *SMALL_TARGETS, check=False)
        assert rerun.returncode != 0
        shards = shard_dir(tmp_path).relative_to(tmp_path)  # jobs get their paths relative to the working directory
        assert f"{holder} is still writing {shards}: " in (tmp_path / SMALL_PREDICT_LOG).read_text()
        os.kill(pid, signal.SIGKILL)  # what README says to do with an orphaned job
        time.sleep(0.5)  # let the kernel release its lock
        run_snakemake(tmp_path, "--unlock")
        run_snakemake(tmp_path, *SMALL_TARGETS)
        assert_resumed_like_the_reference(tmp_path, small_reference, finished)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the first run's process group
        except ProcessLookupError:
            pass


def test_a_predict_job_runs_torch_on_the_threads_snakemake_gave_it(small_reference: Path) -> None:
    """The reference run's predict job had Snakemake's --cores 2 (threads: the cores over the parts, one part):
    its log says torch ran on that many threads (no more than the machine has)."""
    log = (small_reference / SMALL_PREDICT_LOG).read_text()
    assert re.findall(r"torch threads: (\d+)", log) == [str(min(2, os.cpu_count() or 1))], log
