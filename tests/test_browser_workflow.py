"""`all` on the small demo builds the image browser and the hard set: the page opens in headless Chromium without
errors, and the hard set holds exactly the images no transform solves and reads back through the imagenet_hard
adapter with the same labels, origins and bytes."""

from pathlib import Path

import numpy as np
import pytest

from tests.chromium import CHROMIUM, Chromium
from tests.conftest import copy_study, run_snakemake
from tests.test_browser import ARTIFACTS, READY, read_back
from zoomeval.analysis.matrix import read_matrix
from zoomeval.core.manifest import read_manifest

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, small_reference) -> Path:
    """The small demo's finished run (predictions, analyses), copied with its times, then `all`."""
    workdir = copy_study(small_reference, tmp_path_factory.mktemp("browser_workflow") / "run")
    run_snakemake(workdir, "all")
    return workdir


def test_all_builds_the_browser_and_the_hard_set(workdir):
    browser = workdir / "results" / "browser"
    for path in (
        "index.html",
        "assets/browser.js",
        "assets/classes.js",
        "catalogue.js",
        "data/demo/index.js",
        "data/demo/pages/00000.js",
    ):
        assert (browser / path).is_file(), path
    thumbnails = sorted(p.name for p in (browser / "thumbnails" / "demo").glob("*.jpg"))
    assert thumbnails == [f"{k:06d}.jpg" for k in range(12)]
    assert (workdir / "results" / "hard" / "summary.md").is_file()


def test_the_hard_set_is_the_unsolved_images_and_reads_back_unchanged(workdir, tmp_path):
    matrix, _, image_ids = read_matrix(workdir / "results/analysis/demo/original/efficientnet_lite0/correct.npz")
    by_id = {r.image_id: r for r in read_manifest(workdir / "results/datasets/demo/manifest.parquet")}
    hard = [by_id[image_ids[j]] for j in np.flatnonzero(~matrix.any(axis=0))]
    path = workdir / "results" / "hard" / "demo.parquet"
    records = read_back(path, tmp_path)
    assert [r.labels for r in records] == [r.labels for r in hard]
    assert [r.origin for r in records] == [r.origin for r in hard]
    # the demo's manifest paths are relative to the working directory
    assert [Path(r.path).read_bytes() for r in records] == [(workdir / r.path).read_bytes() for r in hard]
    summary = (workdir / "results" / "hard" / "summary.csv").read_text().splitlines()
    cells = f"12,{len(hard)},{100 * len(hard) / 12:.2f},{'100.00' if hard else ''}"
    assert summary[1:] == [f"demo,demo,{cells},0,0,none", f"demo,all,{cells},0,0,none"]  # the demo leaves none out


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_demo_browser_opens_without_errors(workdir, tmp_path):
    with Chromium(tmp_path / "profile") as chrome:
        chrome.open((workdir / "results" / "browser" / "index.html").as_uri())
        chrome.wait_for(READY)
        assert chrome.evaluate("document.querySelectorAll('article.card').length") == 12
        # images load lazily: those in view (the thumbnails and crops of the first cards)
        in_view = "[...document.images].filter(i => i.getBoundingClientRect().top < innerHeight)"
        chrome.wait_for(f"{in_view}.every(i => i.complete)")
        loaded = chrome.evaluate(f"{in_view}.map(i => i.naturalWidth > 0)")
        assert loaded and all(loaded)
        chrome.screenshot(ARTIFACTS / "browser_demo.png")
        assert chrome.errors == []
