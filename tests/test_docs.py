"""The docs site (mkdocs.yml, docs/): it builds with warnings as errors (broken links and anchors included), its
home page and a how-to guide open in headless Chromium without errors, and its generated reference pages are those
the schema and the rules give (tools/docs.py)."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tests.chromium import CHROMIUM, Chromium
from tests.conftest import ROOT
from zoomeval.analysis.metrics import METRICS_SCHEMA_VERSION
from zoomeval.report.left_out import LEFT_OUT_COLUMNS
from zoomeval.report.tables import PROVENANCE_COLUMNS, TABLE_A8_COLUMNS

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_docs")

spec = importlib.util.spec_from_file_location("docs", ROOT / "tools" / "docs.py")
docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs)
ARTIFACTS = Path(os.environ.get("ZOOMEVAL_TEST_ARTIFACTS", ROOT / "test-artifacts"))


def build_site(out: Path, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict -f <root>/mkdocs.yml`` run from another directory (the site's parent): the
    build reads nothing relative to the working directory."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "--site-dir", str(out)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(cmd, cwd=out.parent, capture_output=True, text=True, env=env)


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
    # a copy of docs/ beside links to the rest of the checkout: the checkout's docs/, which tests running beside this
    # one build, never holds the probe
    root = tmp_path / "checkout"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != "docs":
            (root / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "docs", root / "docs")
    (root / "docs" / "_broken_link_probe.md").write_text(
        "# Probe\n\nSee [the zoom](explanations/zoom.md#no-such-heading).\n"
    )
    proc = build_site(tmp_path / "site", root)
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
@pytest.mark.parametrize(
    ("page", "heading"), [("index.html", "zoomeval"), ("how-to/imagenet-gpu.html", "ResNet-50 on ImageNet val")]
)
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


def test_the_generated_reference_pages_are_up_to_date(capsys):
    """docs/reference/config.md, config/README.md, docs/reference/rules.md and docs/reference/outputs.md are what
    the schema, the rules and the results layout generate; after editing any, run `python tools/docs.py`."""
    assert docs.main(["--check", "--root", str(ROOT)]) == 0, capsys.readouterr().err


def test_the_site_builds_from_another_directory_with_the_readmes_snippets(site):
    assert not Path(site).is_relative_to(ROOT)
    install = (site / "get-started" / "install.html").read_text()
    assert "creates .venv, installs the tested versions (constraints.txt)" in install


def test_pages_show_config_files_as_text_github_shows_too():
    """A page includes a config file as a copy of its text (refreshed by python tools/docs.py), not as a
    snippet line that only the site expands; README.md and CHANGELOG.md stay snippets of the site-only pages."""
    snippets = {m for page in (ROOT / "docs").rglob("*.md") for m in re.findall(r'--8<-- "([^":]+)', page.read_text())}
    assert snippets == {"README.md", "CHANGELOG.md"}
    page = (ROOT / "docs" / "how-to" / "imagenet-gpu.md").read_text()
    for path in ("config/imagenet_val.yaml", "config/overlays/gpu.yaml"):
        assert f"```yaml\n{(ROOT / path).read_text()}```\n<!-- end include {path} -->" in page


def test_an_included_config_that_changed_makes_its_page_stale(tmp_path, capsys):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "a.yaml").write_text("top_k: 3\n")
    page = tmp_path / "docs" / "how-to" / "a.md"
    page.parent.mkdir(parents=True)
    page.write_text(
        "# A\n\n<!-- include config/a.yaml: old -->\n```yaml\ntop_k: 2\n```\n"
        "<!-- end include config/a.yaml -->\n\nAfter.\n"
    )
    refreshed = docs.included_files(tmp_path, page.read_text())
    start = docs.INCLUDE_START.format(path="config/a.yaml")
    assert refreshed == f"# A\n\n{start}\n```yaml\ntop_k: 3\n```\n<!-- end include config/a.yaml -->\n\nAfter.\n"
    assert docs.included_files(tmp_path, refreshed) == refreshed  # written once, then up to date
    (tmp_path / "config" / "a.yaml").write_text("top_k: 4  # ```\n")  # a fence in the file: a longer fence
    assert "````yaml\ntop_k: 4  # ```\n````" in docs.included_files(tmp_path, refreshed)


def test_the_cascades_documented_grid_is_the_codes():
    from zoomeval.analysis.policies import TAU_QUANTILES

    page = " ".join((ROOT / "docs" / "explanations" / "policies.md").read_text().split())
    assert len(TAU_QUANTILES) == 41 and list(TAU_QUANTILES[:3]) == [0, 0.025, 0.05] and TAU_QUANTILES[-1] == 1
    assert "the 41 quantiles 0, 0.025, 0.05, ..., 1 (`TAU_QUANTILES`)" in page
    budgets = yaml.safe_load((ROOT / docs.SCHEMA).read_text())["properties"]["policies"]["properties"]["budgets"]
    assert f"(default {', '.join(map(str, budgets['default']))})" in page
    assert f"at most 42 × (number of budgets) pairs: {42 * len(budgets['default'])} with the defaults" in page


def test_a_new_key_is_documented_from_its_schema_declaration_alone(tmp_path):
    schema = yaml.safe_load((ROOT / docs.SCHEMA).read_text())
    schema["properties"]["inference"]["properties"]["pin_memory"] = {
        "description": "copy batches from pinned memory",
        "type": "boolean",
        "default": False,
        "x-reruns": "no",
    }
    (tmp_path / docs.SCHEMA).parent.mkdir(parents=True)
    (tmp_path / docs.SCHEMA).write_text(yaml.safe_dump(schema))
    (tmp_path / "workflow" / "rules").mkdir()
    rule = "# Stage A.\n\n\n# Why a.\nrule a:\n    output:\n        'x',\n"
    (tmp_path / "workflow" / "rules" / "a.smk").write_text(rule)
    (tmp_path / "Snakefile").write_text("")
    (tmp_path / docs.OUTPUT_NOTES).parent.mkdir(parents=True)
    (tmp_path / docs.OUTPUT_NOTES).write_text("intro: ''\ndetails: {}\nafter: ''\n")
    pages = {str(path): text for path, text in docs.outputs(tmp_path).items()}
    entry = "### `inference.pin_memory`\n\nCopy batches from pinned memory.\n\n- **Type**: boolean\n"
    assert entry + "- **Default**: `false`\n- **Reruns**: no\n" in pages["docs/reference/config.md"]
    row = "| `inference.pin_memory` | copy batches from pinned memory | boolean | `false` | no |"
    assert row in pages["config/README.md"].splitlines()
    assert "### `a`\n\nWhy a.\n\n```python\noutput:\n    'x',\n```" in pages["docs/reference/rules.md"]
    assert "## `workflow/rules/a.smk`\n\nStage A.\n" in pages["docs/reference/rules.md"]


def test_the_outputs_page_gives_each_output_its_declared_columns_and_schema_version():
    """The outputs page takes a table's columns and a file's schema version from the modules that write them."""
    page = docs.outputs_reference({"intro": "", "details": {}, "after": ""})
    table_a8 = page.split("### `table_a8`\n\n")[1].split("\n\n### ")[0].splitlines()
    assert (
        table_a8[0] == "`results/table_a8.{ext}`: Table A8: upper bounds on original, object-only and "
        "background-only images."
    )
    columns = [*TABLE_A8_COLUMNS, *LEFT_OUT_COLUMNS, *PROVENANCE_COLUMNS]
    assert table_a8[2:] == ["- **Columns**: " + ", ".join(f"`{c}`" for c in columns)]
    assert columns[-5:] == ["n_scales", "n_bad", "n_unscored", "left_out", "key_sha256"]
    metrics = page.split("### `metrics`\n\n")[1].split("\n\n### ")[0]
    assert metrics.endswith(f"- **Schema version**: {METRICS_SCHEMA_VERSION}") and METRICS_SCHEMA_VERSION == 6
    assert "| `analyze` | `logs/analysis/{scored}/{variant}/{model}.log` |" in page.splitlines()


def test_the_outputs_page_refuses_details_of_an_undeclared_output():
    with pytest.raises(ValueError, match=r"details of \['table_9'\], which the layout does not declare"):
        docs.outputs_reference({"intro": "", "details": {"table_9": "x"}, "after": ""})


@pytest.mark.parametrize(
    ("node", "words"),
    [
        ({"type": "integer", "minimum": 16, "maximum": 1024}, "integer, 16 to 1024"),
        ({"type": "number", "exclusiveMinimum": 0}, "number, > 0"),
        ({"enum": ["pil", "torch"]}, "`pil` | `torch`"),
        ({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}, "list of 3 number"),
        (
            {"type": "array", "uniqueItems": True, "minItems": 1, "items": {"enum": ["in"]}},
            "list of `in` (unique, at least 1)",
        ),
        ({"oneOf": [{"type": "number", "minimum": 0}, {"type": "null"}]}, "number, ≥ 0 or `null`"),
    ],
)
def test_types_are_written_from_the_schema(node, words):
    assert docs.type_of(node, {}) == words


def test_the_readme_is_short_and_its_links_lead_into_the_docs():
    """README.md stays a front page (at most ~150 lines) whose links all exist; the GPU recipe is one click away."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "make demo" in text and "make test" in text
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert "docs/how-to/imagenet-gpu.md" in links
    assert [link for link in links if not (ROOT / link).exists()] == []
