"""zoomeval as a user installs it: a wheel built from the checkout carries the workflow (Snakefile, rules, scripts,
schema, presets, profiles); installed into a fresh environment outside the checkout, its first study runs from an
empty folder; its dependency ranges keep the torch and timm an environment already has."""

import email
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import LAYOUT, ROOT
from packaging.requirements import Requirement

from zoomeval import __version__

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("test_wheel")]

#: What building the wheel reads from the checkout.
BUILD_INPUTS = ("pyproject.toml", "README.md", "Snakefile", "src", "workflow", "config", "profiles", "envs")
#: The workflow's own folders at the repository's top level: every file in them must be in the wheel.
WORKFLOW_FOLDERS = ("workflow", "config", "profiles", "envs")
#: Table A8 of the quick preset (model, variant, dataset, n_images, acc_1crop, acc_top_k, acc_max), as the
#: checkout's workflow computes it.
QUICK_TABLE_A8 = [
    [
        "efficientnet_lite0",
        "original",
        "demo",
        "12",
        "41.67 [19.33, 68.05]",
        "66.67 [39.06, 86.19]",
        "66.67 [39.06, 86.19]",
    ],
    [
        "efficientnet_lite0",
        "fgset",
        "demo",
        "12",
        "25.00 [8.89, 53.23]",
        "41.67 [19.33, 68.05]",
        "41.67 [19.33, 68.05]",
    ],
    ["efficientnet_lite0", "bgset", "demo", "12", "0.00 [0.00, 24.25]", "0.00 [0.00, 24.25]", "0.00 [0.00, 24.25]"],
]


def ignored(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__" or name.endswith(".egg-info")]


def build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout's build inputs (the build writes its own folders beside them), built
    with the test environment's setuptools: nothing is downloaded."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=ignored)
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The wheel, installed into a fresh environment; then, in an empty folder outside the checkout, the README's
    first study: ``zoomeval --version``, ``init s --preset quick``, ``run``, ``leaderboard s``, a notebook's
    ``zoomeval.Study("s")``, ``policy export`` and the zoom-policy how-to's ``ZoomTTA`` snippet."""
    root = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root / "dist")
    python = fresh_environment(root / "env")
    install = pip_into(python, "install", "--no-deps", "--no-index", str(wheel))
    assert install.returncode == 0, install.stderr
    work = root / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"

    def command(*args: str, cwd: Path = work) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python.parent / "zoomeval"), *args], cwd=cwd, env=env, capture_output=True, text=True
        )

    def script(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(python), "-c", text], cwd=work, env=env, capture_output=True, text=True)

    steps = {"version": command("--version"), "init": command("init", "s", "--preset", "quick")}
    steps["run"] = command("run", cwd=work / "s")
    steps["leaderboard"] = command("leaderboard", "s")
    steps["study"] = script(
        "import zoomeval; print(zoomeval.Study('s').table('table_a8').select('variant', 'n_images').rows())"
    )
    steps["export"] = command(
        "policy", "export", "s", "--policy", "cascade", "--budget", "4", "--fit", "demo", "-o", "cascade-4.json"
    )
    images = sorted((work / "s" / "results" / "datasets" / "demo").rglob("*.png"))[:2]
    how_to = (
        (ROOT / "docs" / "how-to" / "zoom-policy.md").read_text().split("## Apply it\n\n```python\n")[1].split("```")[0]
    )
    steps["zoom_tta"] = script(
        how_to.replace("mystudy", "s").replace('["a.jpg", "b.jpg"]', repr([str(p) for p in images]))
    )
    steps["site"] = Path(python.parent.parent.glob("lib/python*/site-packages").__next__())
    return {"wheel": wheel, "work": work, "steps": steps}


def test_the_wheel_holds_every_file_of_the_package_and_of_the_workflow(installed) -> None:
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    modules = {
        str(p.relative_to(ROOT / "src"))
        for p in (ROOT / "src").rglob("*")
        if p.is_file() and not {"_workflow", "__pycache__"} & set(p.parts) and ".egg-info" not in str(p)
    } | {"zoomeval/_workflow/__init__.py"}
    workflow = {"Snakefile"} | {
        str(p.relative_to(ROOT))
        for folder in WORKFLOW_FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {
        "zoomeval/cli.py",
        "snakemake_logger_plugin_zoomeval/__init__.py",
        "zoomeval/report/published.yaml",
    } <= modules
    assert {"workflow/rules/inference.smk", "workflow/schemas/config.schema.yaml", "config/quick.yaml"} <= workflow
    assert modules - names == set()
    assert {f"zoomeval/_workflow/{name}" for name in workflow} - names == set()
    assert not [name for name in names if name.startswith(("tests/", "docs/")) or "__pycache__" in name]


def test_the_installed_wheel_runs_the_first_study_outside_the_checkout(installed) -> None:
    steps, site = installed["steps"], installed["steps"]["site"]
    for name in ("version", "init", "run", "leaderboard", "study", "export", "zoom_tta"):
        assert steps[name].returncode == 0, (name, steps[name].stderr[-3000:])
    workflow = site / "zoomeval" / "_workflow"
    assert steps["version"].stdout == (
        f"zoomeval {__version__}, commit unknown (not a git checkout: an installed package), workflow in {workflow}\n"
    )
    snakefile = (installed["work"] / "s" / "Snakefile").read_text()
    assert repr(str(workflow / "Snakefile")) in snakefile and "sys.path" not in snakefile
    rows = [line.split(" | ") for line in steps["run"].stdout.splitlines() if line.startswith("| efficientnet_lite0 ")]
    assert [[row[0].removeprefix("| "), *row[1:7]] for row in rows] == QUICK_TABLE_A8
    assert "| efficientnet_lite0 |" in steps["leaderboard"].stdout
    assert steps["study"].stdout == "[('original', 12), ('fgset', 12), ('bgset', 12)]\n"
    answers = steps["zoom_tta"].stdout.splitlines()
    assert len(answers) == 2 and all(int(line.split()[0]) in range(1000) for line in answers), answers


def test_results_from_the_wheel_name_its_version_and_workflow_and_no_commit(installed) -> None:
    import pyarrow.parquet as pq

    predictions = (
        installed["work"]
        / "s"
        / LAYOUT.path("predictions", dataset="demo", variant="original", model="efficientnet_lite0")
    )
    meta = json.loads(pq.read_schema(predictions).metadata[b"zoomeval"])
    workflow = installed["steps"]["site"] / "zoomeval" / "_workflow"
    assert (meta["zoomeval"], meta["zoomeval_commit"], meta["zoomeval_workflow"]) == (__version__, None, str(workflow))


def test_a_wheel_without_its_workflow_files_is_one_line_not_a_traceback(installed, tmp_path: Path) -> None:
    python = fresh_environment(tmp_path / "env")
    assert pip_into(python, "install", "--no-deps", "--no-index", str(installed["wheel"])).returncode == 0
    [site] = (tmp_path / "env").glob("lib/python*/site-packages")
    shutil.rmtree(site / "zoomeval" / "_workflow" / "workflow" / "schemas")
    proc = subprocess.run([str(python.parent / "zoomeval"), "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "zoomeval: this zoomeval installation lacks its workflow files (workflow/schemas/config.schema.yaml in "
        f"{site / 'zoomeval' / '_workflow'}); reinstall it from a wheel built with its package data or from a "
        "checkout (pip install -e .)\n"
    )


def fake_distributions(site: Path, versions: dict[str, str]) -> None:
    """Installed distributions as pip's resolver sees them: a name and a version each, nothing else."""
    for name, version in versions.items():
        folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
        folder.mkdir()
        (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def locked_versions() -> dict[str, str]:
    """constraints.txt: the tested version of each package, by normalised name."""
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {name.lower().replace("_", "-"): version for name, version in pairs}


@pytest.mark.parametrize(
    ("torch", "timm", "installs"),
    [("2.14.0", "1.0.32", ["zoomeval"]), ("2.13.0", "1.0.31", None)],
    ids=["other-patch-releases-kept", "torch-below-the-range"],
)
def test_the_wheel_keeps_the_torch_and_timm_already_installed_within_its_ranges(
    installed, tmp_path, torch, timm, installs
):
    """pip's resolver (--dry-run, no index) over an environment whose every dependency is installed at its tested
    version but torch and timm: another patch release of each is kept and only zoomeval is installed; a torch below
    the declared range is not kept (pip would have to fetch one)."""
    requires = email.message_from_bytes(
        zipfile.ZipFile(installed["wheel"]).read(f"zoomeval-{__version__}.dist-info/METADATA")
    ).get_all("Requires-Dist")
    base = [Requirement(r) for r in requires if "extra ==" not in r]
    versions = locked_versions() | {"torch": torch, "timm": timm}
    python = fresh_environment(tmp_path / "env")
    [site] = (tmp_path / "env").glob("lib/python*/site-packages")
    (site / "borrowed_dependencies.pth").unlink()
    fake_distributions(site, {r.name: versions[r.name.lower().replace("_", "-")] for r in base})
    report = tmp_path / "report.json"
    proc = pip_into(python, "install", "--dry-run", "--no-index", "--report", str(report), str(installed["wheel"]))
    if installs is None:
        assert proc.returncode != 0 and f"zoomeval {__version__} depends on torch>=2.14" in proc.stdout + proc.stderr, (
            proc.stdout
        )
    else:
        assert proc.returncode == 0, proc.stderr
        assert [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]] == installs
