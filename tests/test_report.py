"""The HTML report (`snakemake --report`), opened in headless Chromium."""

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.workflow

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_tables_figures_masks_and_statistics(tmp_path, snakemake_run, config_writer):
    config_writer(tmp_path, scales=[256], top_k=3)
    snakemake_run(tmp_path, "all")
    snakemake_run(tmp_path, "all", "--report", str(tmp_path / "report.html"))
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=10000", "--dump-dom",
         f"file://{tmp_path / 'report.html'}"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    # the report's own JavaScript draws these menu entries, one per result category
    for category in ("Tables", "Figures", "Masks", "Object counts"):
        assert f"<span>{category}</span>" in dom, category
    raw = (tmp_path / "report.html").read_text()
    for name in ("table_a8.csv", "table_1.csv", "table_zoom_groups.csv", "table_aggregation.csv", "anchor_grid.png",
                 "upper_bounds.png", "bbox_contact_sheet.png", "mannwhitney.csv"):  # fmt: skip
        assert name in raw, name
