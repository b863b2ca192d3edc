"""The HTML report from Snakemake's conventional call, `snakemake --report report.html`, opened in headless
Chromium; and the outputs of the run behind it, written under umask 022, are readable by everyone."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_snakemake, write_config

pytestmark = pytest.mark.workflow

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """`all` on the demo at one scale under umask 022, then the report without --cores: the core count comes
    from profiles/default, as for a user who types the plain call."""
    workdir = tmp_path_factory.mktemp("report")
    write_config(workdir, scales=[256], top_k=3)
    early = run_snakemake(workdir, "--report", "report.html", cores=None, check=False)  # before `all` is built
    (workdir / "early_report.log").write_text(f"{early.returncode}\n{early.stdout}{early.stderr}")
    old = os.umask(0o022)  # the subprocess inherits it
    try:
        run_snakemake(workdir, "all")
    finally:
        os.umask(old)
    run_snakemake(workdir, "--report", "report.html", cores=None)
    return workdir


def test_a_report_before_all_is_built_says_to_build_all_first(workdir):
    returncode, out = (workdir / "early_report.log").read_text().split("\n", 1)
    assert returncode != "0"
    assert "snakemake --report: all is not built yet (results/table_a8.csv, results/table_a8.md" in out
    assert "without --report: `snakemake --cores N all`; then run --report again" in out
    assert "marked for report but does not exist" not in out


def test_the_plain_report_call_lists_every_result(workdir):
    raw = (workdir / "report.html").read_text()
    for name in (
        "table_a8.csv",
        "table_1.csv",
        "table_zoom_groups.csv",
        "table_aggregation.csv",
        "anchor_grid.png",
        "upper_bounds.png",
        "bbox_contact_sheet.png",
        "mannwhitney.csv",
        "summary.csv",
    ):
        assert name in raw, name
    # the image browser beside the report, linked from the description and the hard-set caption (JSON-escaped)
    assert raw.count('href=\\"results/browser/index.html\\"') == 2


def test_outputs_are_world_readable_under_umask_022(workdir):
    modes = {str(p.relative_to(workdir)): stat.S_IMODE(p.stat().st_mode) for p in (workdir / "results").rglob("*")}
    assert "results/table_a8.csv" in modes and "results/datasets/demo/images/demo_000.png" in modes
    assert {path: mode for path, mode in modes.items() if mode not in (0o644, 0o755)} == {}


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_tables_figures_masks_and_statistics(workdir):
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={workdir / 'chromium'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            f"file://{workdir / 'report.html'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    # the report's own JavaScript draws these menu entries, one per result category
    for category in ("Tables", "Figures", "Masks", "Object counts"):
        assert f"<span>{category}</span>" in dom, category
