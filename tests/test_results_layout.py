"""The results layout (zoomeval.core.layout): its templates fill and parse back, its logs follow its root, and no
rule file, Snakefile or workflow script spells a results or log path instead of taking it from the layout."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import ROOT, run_snakemake, write_config
from zoomeval.core import layout
from zoomeval.core.layout import JOB_LOGS, OUTPUTS, WILDCARDS, Layout, cases_of, relative_to

#: The files that wire the workflow: every path under the results or logs root they use comes from the layout.
WIRING = [
    ROOT / "Snakefile",
    *sorted((ROOT / "workflow" / "rules").glob("*.smk")),
    *sorted((ROOT / "workflow" / "scripts").glob("*.py")),
]
#: A path under the default results or logs root, as a literal would spell it.
SPELLED = re.compile(r"(?<![\w.])(results|logs)/")
#: A name given to the layout in the rule files: LAYOUT.path("name" / LAYOUT.log("name", or an input function's.
NAMED = re.compile(r"""LAYOUT\.(path|log)\(\s*["'](\w+)["']|(?:of_scored|original_analysis)\(\s*["'](\w+)["']""")


def spelled_paths(text: str) -> list[str]:
    """The string literals (f-strings included) of Python or Snakemake ``text`` that spell a results or log path."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t.string for t in tokens if t.type == tokenize.STRING and SPELLED.search(t.string)]


def undeclared_names(text: str) -> list[str]:
    """The names ``text`` gives the layout that it does not declare (outputs, or job logs for ``LAYOUT.log``)."""
    wrong = []
    for match in NAMED.finditer(text):
        kind, name = ("log", match[2]) if match[1] == "log" else ("path", match[2] or match[3])
        if name not in (JOB_LOGS if kind == "log" else OUTPUTS):
            wrong.append(f"{kind} {name}")
    return wrong


def test_no_rule_file_snakefile_or_script_spells_a_results_path() -> None:
    assert len(WIRING) > 40  # the Snakefile, 14 rule files and the scripts
    spelled = {str(p.relative_to(ROOT)): found for p in WIRING if (found := spelled_paths(p.read_text()))}
    assert spelled == {}, "take these paths from the layout: LAYOUT.path(name) / LAYOUT.log(rule) (core/layout.py)"


def test_the_check_sees_a_spelled_path_and_passes_the_layouts() -> None:
    """Control: a literal results or log path is found, in a plain string or an f-string, in rule syntax too; a
    path taken from the layout, a comment, a caption and a resources path are not."""
    rule = (
        '# writes results/table_x.csv\nrule x:\n    input:\n        f"results/analysis/{s}/metrics.json",\n'
        '    output:\n        report(LAYOUT.path("table_a8", ext="csv"), caption="../report/x.rst"),\n'
        "    log:\n        'logs/tables/x.log',\n    params:\n        f'{R}/labels/x.json',\n"
    )
    assert spelled_paths(rule) == ['f"results/analysis/{s}/metrics.json"', "'logs/tables/x.log'"]


def test_every_name_the_rules_give_the_layout_is_declared() -> None:
    """Names are looked up lazily (in input functions): a typo would only fail the job that reaches it."""
    texts = [p.read_text() for p in WIRING if p.suffix != ".py"]
    assert sum(len(NAMED.findall(t)) for t in texts) > 100
    assert [name for text in texts for name in undeclared_names(text)] == []
    control = 'LAYOUT.path("metrics") LAYOUT.log("metrics") of_scored("manifest") original_analysis("corect")'
    assert undeclared_names(control) == ["log metrics", "path corect"]


def sample(template: str) -> dict[str, str]:
    """A value for each wildcard of ``template``: its name with a dash and a digit (no dot: ``{table}.{ext}`` could
    not tell ``a.b.csv`` apart, nor could Snakemake)."""
    return {name: f"{name}-1" for name in re.findall(r"\{(\w+)\}", template)}


@pytest.mark.parametrize("name", OUTPUTS)
def test_every_output_parses_back_to_its_wildcards(name: str) -> None:
    output = OUTPUTS[name]
    values = sample(output.template)
    layout = Layout("runs/limit-8/results")
    path = layout.path(name, **values)
    assert path.startswith("runs/limit-8/results/") and "{" not in path
    assert layout.parse(name, path) == values
    assert Layout().parse(name, path) is None  # another root's file is not this layout's
    assert set(output.wildcards) <= set(WILDCARDS) and output.what and "\n" not in output.what


def test_paths_leave_unfilled_wildcards_to_snakemake_and_refuse_unknown_ones() -> None:
    layout = Layout()
    assert layout.path("metrics") == "results/analysis/{scored}/{variant}/{model}/metrics.json"
    assert layout.path("correct", scored="{source}") == "results/analysis/{source}/{variant}/{model}/correct.npz"
    assert (
        layout.path("predictions", dataset="demo", variant="original", model="m")
        == "results/predictions/demo/original/m.parquet"
    )
    assert layout.glob("metrics", variant="original") == "results/analysis/*/original/*/metrics.json"
    with pytest.raises(KeyError, match=r"no wildcard \['scored'\]"):
        layout.path("manifest", scored="x")
    assert layout.parse("metrics", "results/analysis/a/original/m/extra/metrics.json") is None


def test_logs_follow_the_results_root() -> None:
    """A run under another results root keeps its logs beside it, apart from the default run's."""
    assert Layout().logs == "logs"
    assert Layout().log("analyze", scored="s", variant="v", model="m") == "logs/analysis/s/v/m.log"
    limited = Layout("runs/limit-8/results")
    assert limited.logs == "runs/limit-8/logs"
    assert limited.log("table", table="table_a8") == "runs/limit-8/logs/tables/table_a8.log"
    assert Layout("results", logs="elsewhere").log("browser") == "elsewhere/browser/site.log"


def test_no_two_outputs_or_logs_share_a_template() -> None:
    templates = [o.template for o in OUTPUTS.values()]
    assert len(set(templates)) == len(templates)
    logs = list(JOB_LOGS.values())
    assert len(set(logs)) == len(logs)


def test_a_named_table_is_a_case_of_the_table_output_and_aggregates_are_no_predictions() -> None:
    """The study reader lists a file under one output: a named table is still a ``table``; an aggregates file, which
    the predictions' template also matches (model ``m.aggregates``), is not a prediction file."""
    assert {"table_a8", "table_1", "leaderboard", "study_index"} <= set(cases_of("table"))
    assert "hard_summary" not in cases_of("table") and "mann_whitney" not in cases_of("table")
    assert Layout().parse("predictions", Layout().path("aggregates", dataset="d", variant="v", model="m")) is not None
    assert cases_of("predictions") == () and cases_of("table_a8") == ()


def test_the_browser_links_its_files_relative_to_its_page() -> None:
    """The page's links (its data, thumbnails and crops) are the layout's paths relative to the page's folder."""
    assert relative_to("browser_thumbnails", "browser", dataset="demo") == "thumbnails/demo"
    assert relative_to("browser_crops", "browser", scored="demo_real") == "crops/demo_real"
    assert relative_to("browser_catalogue", "browser") == "catalogue.js"
    assert relative_to("manifest", "browser", dataset="demo") == "../datasets/demo/manifest.parquet"


def test_the_demo_writes_where_the_layout_says(tmp_path: Path) -> None:
    """Every file the demo's `all` writes is one of the layout's outputs (--summary lists them: no job runs)."""
    write_config(tmp_path)
    proc = run_snakemake(tmp_path, "--summary", "all")
    files = [line.split("\t")[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert len(files) > 50
    unmatched = [f for f in files if all(Layout().parse(name, f) is None for name in OUTPUTS)]
    assert unmatched == []


def test_a_stage_declares_an_outputs_columns_once(monkeypatch) -> None:
    """A stage declares its output's columns (Arrow fields by name) and schema version to the layout; the same
    declaration again (a module imported twice) is fine, a different one or an undeclared output is refused."""
    monkeypatch.setattr(layout, "DECLARED", {})
    layout.declare("hard", pa.schema([("image", pa.binary()), ("label", pa.int64())]), 2)
    layout.declare("hard", ["image", "label"], 2)
    assert layout.DECLARED == {"hard": layout.Declared(("image", "label"), 2)}
    with pytest.raises(ValueError, match="output 'hard' is declared twice, differently"):
        layout.declare("hard", ["image"], 2)
    with pytest.raises(KeyError, match="the layout has no output 'table_9'"):
        layout.declare("table_9", ["a"])
