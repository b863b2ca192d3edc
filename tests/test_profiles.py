"""The workflow profiles: profiles/default (used automatically for local runs) and profiles/slurm."""

import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from zoomeval.core.cluster import PLACEHOLDER, refuse_placeholders
from zoomeval.core.config import ConfigError

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_profiles")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "profiles" / "default" / "config.yaml"
SLURM = ROOT / "profiles" / "slurm" / "config.yaml"
SLURM_CI = ROOT / "profiles" / "slurm-ci" / "config.yaml"  # for .ci/slurm_up.sh's cluster (tests/test_slurm.py)
HAS_SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None
NO_SLURM_PLUGIN = "snakemake-executor-plugin-slurm is not installed (pip install snakemake-executor-plugin-slurm)"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def filled_in(path: Path, folder: Path) -> Path:
    """A copy of the profile at ``path`` (its folder) in ``folder``, with a partition where it ships the placeholder,
    as a user edits it before the first run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(path.read_text().replace(PLACEHOLDER, "batch"))
    return folder / "config.yaml"


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env, timeout=300)


def demo_workdir(tmp_path: Path) -> Path:
    """A working directory with the demo config where the Snakefile looks for it (config/config.yaml)."""
    (tmp_path / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    return tmp_path


def job_blocks(output: str) -> dict[str, str]:
    """The first job block printed for each rule (a dry run prints one block per job)."""
    blocks = {}
    for block in re.split(r"\n(?=\[[^\n]*\]\n(?:local)?rule )", output):
        m = re.search(r"^(?:local)?rule (\w+):", block, re.MULTILINE)
        if m:
            blocks.setdefault(m.group(1), block)
    return blocks


@pytest.fixture(scope="module")
def rule_names(tmp_path_factory) -> set[str]:
    workdir = demo_workdir(tmp_path_factory.mktemp("rules"))
    proc = snakemake(workdir, "--list-rules")
    assert proc.returncode == 0, proc.stderr
    names = {line.strip() for line in proc.stdout.splitlines() if re.fullmatch(r"\s*\w+\s*", line)}
    assert {"predict", "sam_masks", "analyze"} <= names, proc.stdout
    return names


def test_default_profile_is_read_automatically_from_another_directory(tmp_path, monkeypatch):
    """Snakemake 9 finds profiles/default/config.yaml next to the Snakefile; the command line overrides it."""
    from snakemake.cli import parse_args
    from snakemake.utils import available_cpu_count

    monkeypatch.chdir(tmp_path)
    base = ["-s", str(ROOT / "Snakefile"), "--cores", "2", "-n", "results/table_a8.csv"]
    _, args = parse_args(base)
    assert args.resources["gpu"].value == 1  # GPU jobs run one at a time
    assert args.rerun_incomplete and args.show_failed_logs and not args.keep_going
    assert args.executor is None  # local execution
    assert args.targets == ["results/table_a8.csv"]
    assert args.cores == 2
    _, args = parse_args(base[:2] + base[4:])  # no --cores: the profile's `all`
    assert args.cores == available_cpu_count()
    _, args = parse_args([*base, "--resources", "gpu=4"])
    assert args.resources["gpu"].value == 4
    _, args = parse_args([*base, "--workflow-profile", "none"])
    assert "gpu" not in args.resources and not args.rerun_incomplete


@pytest.mark.parametrize("path", [SLURM, SLURM_CI], ids=["slurm", "slurm-ci"])
def test_slurm_profile_names_only_existing_rules(rule_names, path):
    profile = load(path)
    named = set(profile["set-resources"]) | set(profile.get("set-threads", {}))
    assert named <= rule_names, f"not rules of the workflow: {sorted(named - rule_names)}"


@pytest.mark.parametrize("path", [SLURM, SLURM_CI], ids=["slurm", "slurm-ci"])
def test_slurm_profile_is_consistent(path):
    """What the rules rely on, not the values chosen: GPU jobs ask SLURM for a GPU, predict's CPUs match its
    threads, and the core count does not cap them."""
    profile = load(path)
    resources = profile["set-resources"]
    for rule in {"predict", "sam_masks", "tta", "standard_eval", "zero_shot_head"} & set(resources):
        assert int(resources[rule]["gpu"]) >= 1, rule
    for rule in profile["set-threads"]:
        assert resources[rule]["cpus_per_task"] == profile["set-threads"][rule], rule
    # predict's `threads: workflow.cores` needs a core count; it must not cap predict's threads
    assert profile["cores"] >= profile["set-threads"]["predict"]


def resources_at(profile: dict, rule: str, attempt: int) -> dict[str, str]:
    """A rule's SLURM resources as Snakemake evaluates the profile: set-resources over default-resources, and
    strings as Python expressions of ``attempt``."""
    values = {**profile["default-resources"], **profile["set-resources"].get(rule, {})}
    scope = {"__builtins__": {}}, {"attempt": attempt}
    return {k: str(eval(v, *scope) if isinstance(v, str) else v) for k, v in values.items()}


@pytest.mark.workflow
def test_dry_run_with_the_default_profile(tmp_path):
    workdir = demo_workdir(tmp_path)
    proc = snakemake(workdir, "--workflow-profile", str(DEFAULT.parent), "--cores", "2", "-n", "results/table_a8.csv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"workflow specific profile {DEFAULT.parent}" in proc.stderr
    assert "predict" in job_blocks(proc.stdout)


def test_the_shipped_placeholders_are_refused_naming_the_profile_key():
    profile = load(SLURM)
    with pytest.raises(ConfigError, match=r"^default-resources.slurm_partition: 'CHANGE_ME' is the workflow profile"):
        refuse_placeholders(profile["default-resources"], profile["set-resources"])
    partition = {"slurm_partition": "'batch'"}
    refuse_placeholders(partition, profile["set-resources"])  # filled in: accepted
    refuse_placeholders(None, {})  # no resources at all (a local run without a profile)
    for default, per_rule, key in [
        ({**partition, "slurm_account": "'CHANGE_ME'"}, {}, "default-resources.slurm_account"),
        (partition, {"predict": {"slurm_partition": "'CHANGE_ME_GPU'"}}, "set-resources.predict.slurm_partition"),
    ]:
        with pytest.raises(ConfigError, match=rf"^{re.escape(key)}: 'CHANGE_ME(_GPU)?' is the .* \(`s"):
            refuse_placeholders(default, per_rule)


@pytest.mark.workflow
@pytest.mark.skipif(not HAS_SLURM_PLUGIN, reason=NO_SLURM_PLUGIN)
def test_a_dry_run_with_the_shipped_slurm_profile_is_refused_naming_the_placeholder(tmp_path):
    proc = snakemake(demo_workdir(tmp_path), "--workflow-profile", str(SLURM.parent), "-n", "results/table_a8.csv")
    assert proc.returncode != 0 and not job_blocks(proc.stdout)
    assert "default-resources.slurm_partition: 'CHANGE_ME' is the workflow profile's placeholder" in proc.stdout


@pytest.mark.workflow
@pytest.mark.skipif(not HAS_SLURM_PLUGIN, reason=NO_SLURM_PLUGIN)
@pytest.mark.parametrize("path", [SLURM, SLURM_CI], ids=["slurm", "slurm-ci"])
def test_dry_run_with_a_slurm_profile(tmp_path, path):
    """A dry run does not contact SLURM; it evaluates every resource of the profile, which each job shows."""
    workdir = demo_workdir(tmp_path / "work")
    path = filled_in(path, tmp_path / "profile")
    proc = snakemake(workdir, "--workflow-profile", str(path.parent), "-n", "results/table_a8.csv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    blocks = job_blocks(proc.stdout)
    profile = load(path)
    assert f"threads: {profile['set-threads']['predict']}" in blocks["predict"]
    for rule in ("predict", "generated_dataset", "analyze", "table_a8"):
        for key, value in resources_at(profile, rule, attempt=1).items():
            item = f"{key}={value}"
            assert re.search(rf"resources:.*\b{re.escape(item)}\b", blocks[rule]), (rule, item, blocks[rule])


FAKE_SBATCH = """#!/bin/sh
echo "$*" >> "{log}"
echo "sbatch: error: this fake sbatch refuses every job" >&2
exit 1
"""
EMPTY = "#!/bin/sh\n"
FAKE_SACCT = """#!/bin/sh
echo "Slurm accounting storage is disabled" >&2
exit 1
"""


@pytest.mark.workflow
@pytest.mark.skipif(not HAS_SLURM_PLUGIN, reason=NO_SLURM_PLUGIN)
def test_slurm_profile_builds_the_expected_sbatch_calls(tmp_path):
    """A real (not dry) run against stand-in SLURM commands that record and refuse each submission.

    This catches what a dry run cannot: a dry run sets --cores 1 itself, so `threads: workflow.cores`
    fails only in a real cluster run without `cores` in the profile. A refused job is retried, so the
    three calls show the attempt-scaled memory.
    """
    workdir = demo_workdir(tmp_path / "work")
    manifest = workdir / "results/datasets/demo/manifest.parquet"
    (manifest.parent / "images").mkdir(parents=True)
    manifest.touch()  # no metadata: predict is the only job
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    scripts = {"sbatch": FAKE_SBATCH.format(log=log), "sacct": FAKE_SACCT, "sinfo": EMPTY, "squeue": EMPTY}
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    target = "results/predictions/demo/original/efficientnet_lite0.parquet"
    shipped = snakemake(workdir, "--workflow-profile", str(SLURM.parent), target, env=env)
    message = shipped.stdout + shipped.stderr
    assert shipped.returncode != 0 and "slurm_partition: 'CHANGE_ME' is the" in message, message
    assert not log.exists()  # refused before anything was submitted
    path = filled_in(SLURM, tmp_path / "profile")
    proc = snakemake(
        workdir,
        "--workflow-profile",
        str(path.parent),
        target,
        "--slurm-init-seconds-before-status-checks",
        "1",
        env=env,
    )
    assert proc.returncode != 0  # every submission is refused
    assert log.exists(), proc.stdout + proc.stderr
    calls = log.read_text().splitlines()
    profile = load(path)
    assert len(calls) == 1 + profile["retries"], calls
    for attempt, call in enumerate(calls, start=1):
        head = call.split("--wrap", 1)[0]
        want = resources_at(profile, "predict", attempt)
        assert f"-p {want['slurm_partition']} " in head and f"-t {want['runtime']} " in head, head
        assert f"--mem {want['mem_mb']} " in head, head
        assert int(want["mem_mb"]) == attempt * int(resources_at(profile, "predict", 1)["mem_mb"])  # grows per try
        assert f"--cpus-per-task={want['cpus_per_task']}" in head and f"--gpus={want['gpu']}" in head, head
        assert f"--attempt {attempt} " in call and f"--cores {profile['cores']} " in call, call
