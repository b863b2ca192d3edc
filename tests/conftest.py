import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def run_snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the project's workflow in ``workdir`` with ``workdir/config.yaml``."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def write_config(workdir: Path, **overrides: object) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config.update(overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return config


@pytest.fixture
def snakemake_run():
    return run_snakemake


@pytest.fixture
def config_writer():
    return write_config
