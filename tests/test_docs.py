"""The docs site (mkdocs.yml, docs/): it builds with warnings as errors (broken links and anchors included), and its
home page and a how-to guide open in headless Chromium without errors."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.chromium import CHROMIUM, Chromium
from tests.conftest import ROOT

ARTIFACTS = Path(os.environ.get("ZOOMEVAL_TEST_ARTIFACTS", ROOT / "test-artifacts"))


def build_site(out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = build_site(out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_site_builds_strictly_with_every_page_in_the_nav(site):
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix(".html") for p in (ROOT / "docs").rglob("*.md"))
    assert pages and all((site / page).is_file() for page in pages)
    assert "ResNet-50 on ImageNet val" in (site / "how-to" / "imagenet-gpu.html").read_text()


def test_a_broken_link_fails_the_build(tmp_path):
    """The strict build is what catches stale links: a page linking to a missing page or anchor is refused."""
    page = ROOT / "docs" / "_broken_link_probe.md"
    try:
        page.write_text("# Probe\n\nSee [the zoom](explanations/zoom.md#no-such-heading).\n")
        proc = build_site(tmp_path / "site")
    finally:
        page.unlink()
    assert proc.returncode != 0
    assert "no-such-heading" in proc.stdout + proc.stderr


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # keep the test's output to its failures
        pass


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on 127.0.0.1, as `mkdocs serve` or a web host gives it (search needs fetch)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")


@needs_chromium
@pytest.mark.parametrize(("page", "heading"), [("index.html", "zoomeval"),
                                               ("how-to/imagenet-gpu.html", "ResNet-50 on ImageNet val")])  # fmt: skip
def test_pages_open_in_chromium_without_errors(served, tmp_path, page, heading):
    with Chromium(tmp_path / "profile") as chrome:
        chrome.open(f"{served}/{page}")
        chrome.wait_for("document.readyState === 'complete' && document.querySelector('article h1') !== null")
        assert heading in chrome.evaluate("document.querySelector('article h1').textContent")
        # the navigation leads to every section of the site
        nav = chrome.evaluate("document.querySelector('nav.md-nav--primary').textContent")
        assert all(section in nav for section in ("Get started", "How-to guides", "Explanations", "Reference"))
        chrome.screenshot(ARTIFACTS / f"docs_{page.replace('/', '_').removesuffix('.html')}.png")
        assert chrome.errors == []
