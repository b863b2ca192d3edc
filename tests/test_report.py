"""The HTML report from Snakemake's conventional call, `snakemake --report report.html`, opened in headless
Chromium; and the outputs of the run behind it, written under umask 022, are readable by everyone."""

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_snakemake, write_demo_config

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
def report(demo_study, tmp_path_factory) -> Path:
    """The shared demo study (tests/conftest.py: `all` built under umask 022), then the report without --cores: the
    core count comes from profiles/default, as for a user who types the plain call; written beside the study, which
    tests only read."""
    report = tmp_path_factory.mktemp("report") / "report.html"
    run_snakemake(demo_study, "--report", str(report), cores=None)
    return report


def test_a_report_before_all_is_built_says_to_build_all_first(tmp_path):
    write_demo_config(tmp_path)
    early = run_snakemake(tmp_path, "--report", "report.html", cores=None, check=False)
    out = early.stdout + early.stderr
    assert early.returncode != 0
    assert "snakemake --report: all is not built yet (results/table_a8.csv, results/table_a8.md" in out
    assert "without --report: `snakemake --cores N all`; then run --report again" in out
    assert "marked for report but does not exist" not in out


def test_the_plain_report_call_lists_every_result(report):
    raw = report.read_text()
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


def test_outputs_are_world_readable_under_umask_022(demo_study):
    modes = {
        str(p.relative_to(demo_study)): stat.S_IMODE(p.stat().st_mode) for p in (demo_study / "results").rglob("*")
    }
    assert "results/table_a8.csv" in modes and "results/datasets/demo/images/demo_000.png" in modes
    assert {path: mode for path, mode in modes.items() if mode not in (0o644, 0o755)} == {}


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_tables_figures_masks_and_statistics(report, tmp_path):
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            f"file://{report}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    # the report's own JavaScript draws these menu entries, one per result category
    for category in ("Tables", "Figures", "Masks", "Object counts"):
        assert f"<span>{category}</span>" in dom, category
