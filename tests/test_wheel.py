"""zoomeval as a user installs it: a wheel built from the checkout carries the workflow (Snakefile, rules, scripts,
schema, presets, profiles); installed into a fresh environment outside the checkout, its first study runs from an
empty folder; its dependency ranges keep the torch and timm an environment already has."""

import email
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import LAYOUT, ROOT
from packaging.requirements import Requirement

from tests.first_study import fresh_environment, pip_into, site_packages
from zoomeval import __version__

# the first study is a session study that tests/test_run.py's README-path tests read too: one group, built once
pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("test_run")]

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


def test_the_wheel_holds_every_file_of_the_package_and_of_the_workflow(first_study) -> None:
    names = set(zipfile.ZipFile(first_study["wheel"]).namelist())
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
        "zoomeval/cli/__init__.py",
        "snakemake_logger_plugin_zoomeval/__init__.py",
        "zoomeval/report/published.yaml",
    } <= modules
    assert {"workflow/rules/inference.smk", "workflow/schemas/config.schema.yaml", "config/quick.yaml"} <= workflow
    assert modules - names == set()
    assert {f"zoomeval/_workflow/{name}" for name in workflow} - names == set()
    assert not [name for name in names if name.startswith(("tests/", "docs/")) or "__pycache__" in name]


def test_the_installed_wheel_runs_the_first_study_outside_the_checkout(first_study) -> None:
    steps, site = first_study["steps"], first_study["site"]
    for name in ("version", "init", "full", "leaderboard", "notebook", "export", "zoom_tta"):
        assert steps[name].returncode == 0, (name, steps[name].stderr[-3000:])
    workflow = site / "zoomeval" / "_workflow"
    assert steps["version"].stdout == (
        f"zoomeval {__version__}, commit unknown (not a git checkout: an installed package), workflow in {workflow}\n"
    )
    snakefile = (first_study["study"] / "Snakefile").read_text()
    assert repr(str(workflow / "Snakefile")) in snakefile and "sys.path" not in snakefile
    rows = [line.split(" | ") for line in steps["full"].stdout.splitlines() if line.startswith("| efficientnet_lite0 ")]
    assert [[row[0].removeprefix("| "), *row[1:7]] for row in rows] == QUICK_TABLE_A8
    assert "| efficientnet_lite0 |" in steps["leaderboard"].stdout
    assert steps["notebook"].stdout == "[('original', 12), ('fgset', 12), ('bgset', 12)]\n"
    answers = steps["zoom_tta"].stdout.splitlines()
    assert len(answers) == 2 and all(int(line.split()[0]) in range(1000) for line in answers), answers


def test_results_from_the_wheel_name_its_version_and_workflow_and_no_commit(first_study) -> None:
    import pyarrow.parquet as pq

    predictions = first_study["study"] / LAYOUT.path(
        "predictions", dataset="demo", variant="original", model="efficientnet_lite0"
    )
    meta = json.loads(pq.read_schema(predictions).metadata[b"zoomeval"])
    workflow = first_study["site"] / "zoomeval" / "_workflow"
    assert (meta["zoomeval"], meta["zoomeval_commit"], meta["zoomeval_workflow"]) == (__version__, None, str(workflow))


def test_a_wheel_without_its_workflow_files_is_one_line_not_a_traceback(first_study, tmp_path: Path) -> None:
    python = fresh_environment(tmp_path / "env")
    assert pip_into(python, "install", "--no-deps", "--no-index", str(first_study["wheel"])).returncode == 0
    [site] = (tmp_path / "env").glob("lib/python*/site-packages")
    shutil.rmtree(site / "zoomeval" / "_workflow" / "workflow" / "schemas")
    proc = subprocess.run([str(python.parent / "zoomeval"), "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "zoomeval: this zoomeval installation lacks its workflow files (workflow/schemas/config.schema.yaml in "
        f"{site / 'zoomeval' / '_workflow'}); reinstall it from a wheel built with its package data or from a "
        "checkout (pip install -e .)\n"
    )


def test_a_wheel_without_its_dependencies_is_one_line_naming_the_first_missing_module(first_study, tmp_path) -> None:
    python = fresh_environment(tmp_path / "env")
    (site_packages(python) / "borrowed_dependencies.pth").unlink()  # nothing but the wheel
    assert pip_into(python, "install", "--no-deps", "--no-index", str(first_study["wheel"])).returncode == 0
    proc = subprocess.run([str(python.parent / "zoomeval"), "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert re.fullmatch(
        r"zoomeval: No module named '\w+': a dependency of zoomeval is missing; install it with zoomeval's "
        r"dependencies \(pip install zoomeval-\*\.whl, or pip install -e \. in a checkout\)\n",
        proc.stderr,
    ), proc.stderr


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
    first_study, tmp_path, torch, timm, installs
):
    """pip's resolver (--dry-run, no index) over an environment whose every dependency is installed at its tested
    version but torch and timm: another patch release of each is kept and only zoomeval is installed; a torch below
    the declared range is not kept (pip would have to fetch one)."""
    requires = email.message_from_bytes(
        zipfile.ZipFile(first_study["wheel"]).read(f"zoomeval-{__version__}.dist-info/METADATA")
    ).get_all("Requires-Dist")
    base = [Requirement(r) for r in requires if "extra ==" not in r]
    versions = locked_versions() | {"torch": torch, "timm": timm}
    python = fresh_environment(tmp_path / "env")
    [site] = (tmp_path / "env").glob("lib/python*/site-packages")
    (site / "borrowed_dependencies.pth").unlink()
    fake_distributions(site, {r.name: versions[r.name.lower().replace("_", "-")] for r in base})
    report = tmp_path / "report.json"
    proc = pip_into(python, "install", "--dry-run", "--no-index", "--report", str(report), str(first_study["wheel"]))
    if installs is None:
        assert proc.returncode != 0 and f"zoomeval {__version__} depends on torch>=2.14" in proc.stdout + proc.stderr, (
            proc.stdout
        )
    else:
        assert proc.returncode == 0, proc.stderr
        assert [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]] == installs
