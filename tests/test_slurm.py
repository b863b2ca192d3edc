"""The workflow through real SLURM daemons with profiles/slurm-ci (start them with `.ci/slurm_up.sh`, as root).

One run of the small demo is killed while predict writes its shards: the Snakemake controller with SIGKILL and
the predict job with `scancel --signal=KILL`. The rerun through the profile reuses the finished shards and
gives tables byte-identical to an uninterrupted local run. Along the way the test checks that every job went
through SLURM and that predict got the cluster's (fake) GPU.
"""

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.conftest import ROOT, SMALL_PREDICTIONS, SMALL_TARGETS, run_snakemake, write_small_config
from tests.test_resume import (
    assert_no_partial_outputs,
    assert_resumed_like_the_reference,
    finished_shards,
    n_shards,
    start_snakemake,
    wait_for_first_shard,
)
from zoomeval.core.io import read_metadata

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

PROFILE = ROOT / "profiles" / "slurm-ci"
RULES = {"generated_dataset", "predict", "standard_eval", "analyze", "table_a8", "table_1", "table_aggregation"}
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"}


def slurm(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{' '.join(args)}: {proc.stderr}"
    return proc.stdout


def why_no_slurm() -> str | None:
    """Why the local SLURM of .ci/slurm_up.sh cannot run the test, or None."""
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed"
    if not (shutil.which("sinfo") and shutil.which("sbatch") and shutil.which("scancel")):
        return "SLURM is not installed (no sinfo/sbatch/scancel); start a local one with `.ci/slurm_up.sh` as root"
    try:
        proc = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%T %c"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer in 30 s; is slurmctld running? (.ci/slurm_up.sh)"
    if proc.returncode != 0:
        return f"sinfo failed: {proc.stderr.strip()}; is slurmctld running? (.ci/slurm_up.sh)"
    if not proc.stdout.strip():
        return "SLURM has no partition 'debug' (profiles/slurm-ci submits there; see .ci/slurm_up.sh)"
    state, cpus = proc.stdout.split()[:2]
    if state != "idle":
        return f"the SLURM node is '{state}', not idle (another job running, or drained: see `sinfo -R`)"
    if int(cpus) < 2:
        return f"the SLURM node has {cpus} CPU, profiles/slurm-ci asks for 2"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """Skip unless the local SLURM is up (session scope: checked before the session's reference run)."""
    reason = why_no_slurm()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def slurm_workdir(slurm_cluster, tmp_path):
    """A working directory; afterwards, cancel any SLURM job still running there (e.g. after a failure)."""
    yield tmp_path
    for line in slurm("squeue", "-h", "-o", "%i %Z").splitlines():
        job, workdir = line.split(maxsplit=1)
        if Path(workdir) == tmp_path:
            subprocess.run(["scancel", job], timeout=60)


def job_processes(job: str) -> dict[str, dict[str, str]]:
    """Command line -> environment of the processes that run SLURM job ``job`` (found by SLURM_JOB_ID)."""
    found = {}
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
            if environ.get("SLURM_JOB_ID") == job:
                found[" ".join(proc.cmdline())] = environ
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def job_state(job: str) -> str:
    """JobState of ``job`` (finished jobs stay known for MinJobAge=600 s)."""
    return re.search(r"\bJobState=(\S+)", slurm("scontrol", "show", "job", "-o", job)).group(1)


def slurm_logs(workdir: Path, rule: str) -> list[Path]:
    return sorted((workdir / ".snakemake/slurm_logs" / f"rule_{rule}").rglob("*.log"), key=lambda p: int(p.stem))


def test_killed_slurm_run_resumes_from_its_shards_to_the_local_tables(slurm_cluster, slurm_workdir, small_reference):
    workdir = slurm_workdir
    write_small_config(workdir)
    controller = start_snakemake(workdir, "--workflow-profile", str(PROFILE))
    wait_for_first_shard(workdir, controller)

    # predict runs as a SLURM job (not under the controller) with the fake GPU
    [log] = slurm_logs(workdir, "predict")
    killed = log.stem  # the SLURM log is named after the job id
    environments = job_processes(killed)
    assert environments, f"no process with SLURM_JOB_ID={killed}"
    assert {e.get("CUDA_VISIBLE_DEVICES") for e in environments.values()} == {"0"}, list(environments)
    assert "0" in {e.get("SLURM_JOB_GPUS") for e in environments.values()}  # set in the batch step
    assert any("predict.py" in cmd for cmd in environments), list(environments)  # the inference itself

    os.killpg(controller.pid, signal.SIGKILL)
    assert controller.wait(timeout=30) == -signal.SIGKILL
    assert job_state(killed) == "RUNNING"  # the job outlives its controller
    slurm("scancel", "--signal=KILL", "--full", killed)
    deadline = time.monotonic() + 60
    while job_state(killed) in ACTIVE or job_processes(killed):
        assert time.monotonic() < deadline, f"job {killed} still {job_state(killed)} 60 s after scancel"
        time.sleep(0.2)
    assert job_state(killed) in {"FAILED", "CANCELLED"}
    finished = finished_shards(workdir)
    assert 1 <= len(finished) < n_shards(small_reference), finished
    assert not (workdir / SMALL_PREDICTIONS).exists()
    # a standard_eval job the killed controller submitted beside predict runs to its end
    deadline = time.monotonic() + 120
    while slurm("squeue", "--noheader").strip():
        assert time.monotonic() < deadline, "jobs still queued 120 s after the kill"
        time.sleep(1)
    done_before = int((workdir / "results/standard/demo/efficientnet_lite0.parquet").exists())
    assert_no_partial_outputs(workdir)

    run_snakemake(workdir, "--unlock")
    rerun = run_snakemake(workdir, "--workflow-profile", str(PROFILE), *SMALL_TARGETS)
    assert_resumed_like_the_reference(workdir, small_reference, finished)

    # every job went through SLURM, one SLURM log each (predict twice); the new predict job got the GPU
    submitted = len(re.findall(r"has been submitted with SLURM jobid", rerun.stdout + rerun.stderr))
    assert submitted == len(RULES) - 1 - done_before  # all but the manifest (and a finished standard_eval)
    assert {p.name.removeprefix("rule_") for p in (workdir / ".snakemake/slurm_logs").iterdir()} == RULES
    for rule in RULES:
        logs = slurm_logs(workdir, rule)
        assert len(logs) == (2 if rule == "predict" else 1), (rule, logs)
        assert f"Finished jobid: 0 (Rule: {rule})" in logs[-1].read_text(), logs[-1]
    resumed = slurm_logs(workdir, "predict")[-1].stem
    assert resumed != killed
    details = slurm("scontrol", "show", "job", "-o", resumed)
    assert "JobState=COMPLETED" in details and re.search(r"TresPerJob=gres[:/]gpu:1\b", details), details
    # inference.device auto: CUDA_VISIBLE_DEVICES=0 without CUDA still runs on the CPU
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert read_metadata(workdir / SMALL_PREDICTIONS)["device"] == expected
