"""The tta stage end to end on the demo (small K), and the plan of config/tta.yaml (the paper's Table 5)."""

import csv
import hashlib
import os
import signal
import subprocess
import time

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT, snakemake_command, stand_in_data_paths
from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import read_metadata

pytestmark = pytest.mark.workflow


def job_counts(out: str) -> dict[str, int]:
    table = out[out.index("Job stats:") :].split("\n\n")[0].splitlines()[3:]
    return {name: int(n) for name, n in (line.split() for line in table)}


def test_the_demo_builds_table_tta_and_a_memo_setting_reruns_only_the_memo_jobs(tmp_path, snakemake_run, config_writer):
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config_writer(
        tmp_path,
        datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original"]}},
        stats={"pairs": []},
        tta={**demo["tta"], "views": 2},
    )
    snakemake_run(tmp_path, "results/table_tta.csv")
    rows = list(csv.DictReader((tmp_path / "results" / "table_tta.csv").open()))
    assert [(r["method"], r["model"]) for r in rows] == [
        (m, model) for m in ("none", "memo_augmix", "memo_rrc") for model in ("efficientnet_lite0", "all")
    ]
    assert all(0 <= float(r["demo"]) <= 100 and float(r["seconds_per_image"]) > 0 for r in rows)
    for method in ("none", "memo_augmix", "memo_rrc"):
        path = tmp_path / "results" / "tta" / "demo" / method / "efficientnet_lite0.parquet"
        assert pq.read_table(path).num_rows == 12
        meta = read_metadata(path)
        assert meta["method"] == method and meta["n_images"] == 12
        assert (method == "none") == ("views" not in meta["settings"]) and meta["settings"].get("views", 2) == 2
    assert "MEMO + RRC: K = 2 views" in (tmp_path / "results" / "table_tta.md").read_text()
    assert_a_killed_forced_rerun_is_completed_without_forcerun(tmp_path, snakemake_run)

    config_writer(
        tmp_path,
        datasets={"demo": {**demo["datasets"]["demo"], "variants": ["original"]}},
        stats={"pairs": []},
        tta={**demo["tta"], "views": 2, "lr": 0.001},
    )
    plan = snakemake_run(tmp_path, "results/table_tta.csv", "--dry-run")
    assert job_counts(plan.stdout + plan.stderr) == {"tta": 2, "table_tta": 1, "total": 3}


def assert_a_killed_forced_rerun_is_completed_without_forcerun(workdir, snakemake_run):
    """``--forcerun tta`` killed while a tta job runs: its file is still the old one (Snakemake removed it before
    the fix, leaving the table of a file that was gone and "Nothing to be done"), and the same command without
    ``--forcerun`` reruns the killed job and the table."""
    files = [
        workdir / "results" / "tta" / "demo" / m / "efficientnet_lite0.parquet"
        for m in ("none", "memo_augmix", "memo_rrc")
    ]
    # the target first: --forcerun takes every argument after it
    cmd = snakemake_command(workdir, "results/table_tta.csv", "--forcerun", "tta")
    with open(workdir / "forced.log", "w") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    # a tta job holds its .shards folder while it runs
    while not list((workdir / "results" / "tta").glob("*/*/.*.shards")) and time.monotonic() < deadline:
        assert proc.poll() is None, (workdir / "forced.log").read_text()[-3000:]
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert all(f.exists() for f in files) and (workdir / "results" / "table_tta.csv").exists()
    snakemake_run(workdir, "--unlock")
    again = snakemake_run(workdir, "results/table_tta.csv")
    assert job_counts(again.stdout + again.stderr) == {"tta": 1, "table_tta": 1, "total": 2}
    plan = snakemake_run(workdir, "results/table_tta.csv", "--dry-run")
    assert "Nothing to be done" in plan.stdout + plan.stderr


def test_the_papers_tta_config_plans_three_methods_for_three_resnets_on_five_datasets(
    tmp_path, snakemake_run, config_writer
):
    config = yaml.safe_load((ROOT / "config" / "tta.yaml").read_text())
    stand_in_data_paths(config, tmp_path)
    for name, entry in config["models"].items():  # stand-ins for the checkpoints, pinned by their sha256
        if entry["source"] == "checkpoint":
            (tmp_path / f"{name}.pth.tar").write_text(name)
            entry["checkpoint"] = str(tmp_path / f"{name}.pth.tar")
            entry["weights"] = sha256_file(tmp_path / f"{name}.pth.tar")
    config["stats"] = {"pairs": []}  # write_config starts from the demo config, which compares demo datasets
    config_writer(tmp_path, **config)
    plan = snakemake_run(tmp_path, "results/table_tta.csv", "--dry-run")
    out = plan.stdout + plan.stderr
    # 2 archives to download and extract (ImageNet-A and -R), 3 weights (1 torchvision, 2 checkpoints linked in)
    fetches = {"fetch_url": 2, "extract_archive": 2, "fetch_weights": 3}
    assert job_counts(out) == {**fetches, "dataset_manifest": 5, "tta": 45, "table_tta": 1, "total": 58}
    assert "results/tta/objectnet/memo_rrc/moex_cutmix.parquet" in out
    assert f"resources/weights/checkpoint/resnet50.{config['models']['moex_cutmix']['weights']}" in out

    # the checkpoint's sha256 is checked when the run starts (onstart), before any job
    # a wrong sha256 (not all zeros: see config/tta.yaml)
    config["models"]["moex_cutmix"]["weights"] = hashlib.sha256(b"another file").hexdigest()
    config_writer(tmp_path, **config)
    refused = snakemake_run(tmp_path, "results/table_tta.csv", check=False)
    assert refused.returncode != 0
    assert f"{tmp_path}/moex_cutmix.pth.tar: sha256 " in refused.stdout + refused.stderr
    assert "(pinned in models.moex_cutmix.weights)" in refused.stdout + refused.stderr
    # no job ran: no results and no weights, only the local checkpoints' remembered sha256 (hashed with the DAG)
    made = [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "resources").rglob("*") if p.is_file()]
    assert not (tmp_path / "results").exists() and made == ["resources/weights/.sha256.json"]
