"""The README's first study as a new user walks it, from the wheel: built from the checkout, installed into a fresh
environment outside it, and run from an empty folder. ``tests/conftest.py``'s ``first_study`` fixture builds it once
per session; tests/test_run.py and tests/test_wheel.py read it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tests.test_resume import finished_shards
from tests.test_study import files_and_times

ROOT = Path(__file__).resolve().parents[1]
#: What building the wheel reads from the checkout.
BUILD_INPUTS = ("pyproject.toml", "README.md", "Snakefile", "src", "workflow", "config", "profiles", "envs")
#: The full run's shards are the resume tests' (two images each): a run stopped after the first can resume it.
SHARDS = ("--set", "inference.shard_images=2")
#: Files a full run would have, which the limited run must leave alone.
STAND_INS = ("results/table_a8.csv", "results/datasets/demo/manifest.parquet", "logs/tables/table_a8.log")


def _ignored(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__" or name.endswith(".egg-info")]


def build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout's build inputs (the build writes its own folders beside them), built
    with the test environment's setuptools: nothing is downloaded."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=_ignored)
        else:
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out)]
    subprocess.run([*pip, str(source)], check=True, capture_output=True, text=True)
    [wheel] = out.glob("zoomeval-*.whl")
    return wheel


def fresh_environment(folder: Path) -> Path:
    """A new virtual environment (its python) whose own site-packages come first and which finds the test
    environment's installed dependencies after them (a path line, so the editable install's finder stays out)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    [site] = folder.glob("lib/python*/site-packages")
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


def pip_into(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args], capture_output=True, text=True)


def site_packages(python: Path) -> Path:
    [site] = python.parent.parent.glob("lib/python*/site-packages")
    return site


def interrupted_run(argv: list[str], study: Path, env: dict[str, str], timeout: float = 900) -> tuple[int, str, list]:
    """``zoomeval run`` stopped by one Ctrl-C once its predict job has written its first shard: its exit status,
    what it printed on screen and the shards the interrupted job had finished."""
    with open(study.parent / "interrupted.err", "w+") as err:
        proc = subprocess.Popen(argv, cwd=study, stdout=err, stderr=err, env=env)
        deadline = time.monotonic() + timeout
        while not finished_shards(study) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # as the terminal sends Ctrl-C to zoomeval run, the foreground process
        status = proc.wait(timeout=300)
        err.seek(0)
        return status, err.read(), finished_shards(study)


def walk(root: Path) -> dict:
    """The wheel installed in ``root/env``, then in an empty folder ``root/work``: ``zoomeval --version``, ``init
    study --preset quick``, ``run --limit 2`` (with stand-ins for a full run's files, which it must leave alone), a
    ``run`` interrupted by Ctrl-C after its first prediction shard and run again, ``leaderboard`` (full and limited),
    a notebook's ``zoomeval.Study``, ``policy save`` and the zoom-policy how-to's ``ZoomTTA`` snippet."""
    wheel = build_wheel(root / "dist")
    python = fresh_environment(root / "env")
    install = pip_into(python, "install", "--no-deps", "--no-index", str(wheel))
    assert install.returncode == 0, install.stderr
    work, zoomeval = root / "work", str(python.parent / "zoomeval")
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"

    def command(*args: str, cwd: Path = work) -> subprocess.CompletedProcess[str]:
        return subprocess.run([zoomeval, *args], cwd=cwd, env=env, capture_output=True, text=True)

    def script(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(python), "-c", text], cwd=work, env=env, capture_output=True, text=True)

    study = work / "study"
    steps: dict = {"version": command("--version"), "init": command("init", "study", "--preset", "quick")}
    for path in STAND_INS:
        (study / path).parent.mkdir(parents=True, exist_ok=True)
        (study / path).write_text(f"the full run's {path}\n")
    before = {name: files_and_times(study / name) for name in ("results", "logs")}
    steps["limited"] = command("run", "--limit", "2", cwd=study)
    steps["untouched"] = [
        name
        for name, files in before.items()
        if files != {k: v for k, v in files_and_times(study / name).items() if not k.startswith("limit-2/")}
    ]
    for path in STAND_INS:
        (study / path).unlink()
    steps["interrupted"] = interrupted_run([zoomeval, "run", *SHARDS], study, env)
    steps["full"] = command("run", *SHARDS, cwd=study)
    steps["leaderboard"] = command("leaderboard", "study")
    steps["leaderboard_limited"] = command("leaderboard", "--limit", "2", "study")
    table_a8 = "zoomeval.Study('study').table('table_a8').select('variant', 'n_images').rows()"
    steps["notebook"] = script(f"import zoomeval; print({table_a8})")
    policy = ("--policy", "cascade", "--budget", "4", "--fit", "demo", "-o", "cascade-4.json")
    steps["export"] = command("policy", "save", "study", *policy)
    images = sorted((study / "results" / "datasets" / "demo").rglob("*.png"))[:2]
    how_to = (ROOT / "docs" / "how-to" / "zoom-policy.md").read_text()
    snippet = how_to.split("## Apply it\n\n```python\n")[1].split("```")[0]
    snippet = snippet.replace("mystudy", "study").replace('["a.jpg", "b.jpg"]', repr([str(p) for p in images]))
    steps["zoom_tta"] = script(snippet)
    return {"wheel": wheel, "python": python, "site": site_packages(python), "study": study, "steps": steps}
