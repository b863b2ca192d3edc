"""The package's shape: stages import only earlier ones, functions stay short, and building the workflow's DAG
imports none of the ML stack."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "zoomeval"
#: The stages in order: a module may import its own stage, core and earlier stages only.
STAGES = (
    "core",
    "datasets",
    "masks",
    "inference",
    "analysis",
    "report",
    "browser",
    "policy",
    "study",
    "audit",
    "publish",
)
MAX_FUNCTION_LINES = 50
#: The modules above the stages, which wire them (no stage imports one): zoomeval.run is `zoomeval run`.
ABOVE_STAGES = (
    "zoomeval.registries",
    "zoomeval.study.directory",
    "zoomeval.cli",
    "zoomeval.cli.audit",
    "zoomeval.cli.common",
    "zoomeval.cli.export",
    "zoomeval.cli.init",
    "zoomeval.cli.leaderboard",
    "zoomeval.cli.list",
    "zoomeval.cli.policy",
    "zoomeval.cli.predict",
    "zoomeval.cli.run",
    "zoomeval.__main__",
    "zoomeval.preflight",
    "zoomeval.run",
    "zoomeval.run.launch",
    "zoomeval.run.display",
    "zoomeval.run.events",
    "zoomeval.run.lock",
    "zoomeval.run.logger_plugin",
    "zoomeval.run.overall",
    "zoomeval.run.plan",
    "zoomeval.run.settings",
    "zoomeval.run.summary",
    "zoomeval.run.targets",
)
#: What building the DAG must not import (each would cost seconds on every `snakemake -n` and SLURM job start).
HEAVY = ("torch", "torchvision", "timm", "scipy", "polars", "open_clip")


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def stage(module: str) -> str | None:
    """The stage of a ``zoomeval.<stage>...`` module name; None for the modules above the stages."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in STAGES else None


def test_every_module_belongs_to_a_stage_or_wires_them() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "preflight.py", "registries.py"]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted([*STAGES, "cli", "run", "_workflow"])  # _workflow: the workflow's files, as package data


def test_stages_import_only_core_and_earlier_stages() -> None:
    wrong = []
    for path in modules():
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        own = stage(name)
        for target in imported(path):
            if not target.startswith("zoomeval."):
                continue
            if target in ABOVE_STAGES and own is not None:
                wrong.append(f"{name} imports {target}, which sits above the stages")
            elif own and stage(target) and STAGES.index(stage(target)) > STAGES.index(own):
                wrong.append(f"{name} ({own}) imports {target} ({stage(target)})")
    assert wrong == []


#: A stage after core, named in a module of core: an import, or a string that reaches one (``module:NAME``).
LATER_STAGE = re.compile(r"zoomeval\.(?:analysis|inference|masks|report|datasets|run)\b")


def later_stages_named(source: str) -> list[str]:
    """The later stages ``source`` names in its code or its strings; docstrings and comments aside (a cross-reference
    in prose is no dependency)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and ast.get_docstring(node, clean=False) is not None
        ):
            node.body[0] = ast.Pass()
    return [match[0] for match in LATER_STAGE.finditer(ast.unparse(tree))]


def test_core_names_no_later_stage_in_code_or_strings() -> None:
    """Core's modules neither import a later stage nor name one in a string for someone to import later (each
    stage declares its outputs' columns to the layout instead, :func:`zoomeval.core.layout.declare`)."""
    named = {p.name: later_stages_named(p.read_text()) for p in sorted((PACKAGE / "core").glob("*.py"))}
    assert {name: found for name, found in named.items() if found} == {}


def test_the_core_check_sees_strings_and_imports_but_not_prose() -> None:
    source = (
        '"""See :mod:`zoomeval.report.tables`."""\nimport zoomeval.masks.boxes\n# zoomeval.inference.tta\n'
        'X = "zoomeval.report.tables:COLUMNS"\ndef f():\n    """zoomeval.run."""\n    return f"zoomeval.{X}"\n'
    )
    assert later_stages_named(source) == ["zoomeval.masks", "zoomeval.report"]


def test_the_import_check_sees_a_late_import(tmp_path: Path) -> None:
    """Control: an import inside a function counts."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from zoomeval.report.tables import write_table_a8\n")
    assert imported(module) == {"zoomeval.report.tables"} and stage("zoomeval.report.tables") == "report"


def long_functions(path: Path) -> list[str]:
    return [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_in_the_package_is_longer_than_50_lines(tmp_path: Path) -> None:
    assert [f for path in modules() for f in long_functions(path)] == []
    control = tmp_path / "long.py"
    control.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert long_functions(control) == [f"{control}:1 f (51 lines)"]


def paper_config(workdir: Path) -> dict:
    """config/paper.yaml with stand-ins for its local archives (empty files: not archives, nothing to extract)."""
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    for name, entry in config["datasets"].items():
        for key, spec in entry.items():
            if isinstance(spec, str) and spec.startswith("/data/"):
                entry[key] = str(workdir / f"{name}-{key}.tar")
                (workdir / f"{name}-{key}.tar").touch()
    return config


@pytest.mark.parametrize("which", ["demo", "paper"])
def test_building_the_dag_imports_no_ml_stack(tmp_path: Path, which: str) -> None:
    """``snakemake -n all`` (parsing, config checks, the DAG with its fetch jobs) under ``-X importtime``, which lists
    every module the process imports."""
    config = paper_config(tmp_path) if which == "paper" else yaml.safe_load((ROOT / "config/config.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--cores",
        "1",
        "-n",
        "all",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", proc.stderr, flags=re.M))
    assert "zoomeval.registries" in loaded and "snakemake.workflow" in loaded  # the check sees the imports
    assert sorted(name for name in loaded if name.split(".")[0] in HEAVY) == []


def test_the_documented_layout_names_every_module() -> None:
    """The docs' code layout (docs/reference/development.md) lists each module of src/zoomeval once (``tables.py``
    twice: two stages)."""
    page = (ROOT / "docs" / "reference" / "development.md").read_text()
    block = re.search(r"^# Code layout and development\n\n```text\n(.*?)^```", page, re.M | re.S)
    assert block is not None
    package = block[1][block[1].index("src/zoomeval/") : block[1].index("\nbench/")]
    listed = sorted(re.findall(r"\b\w+\.py\b", package))
    assert listed == sorted(p.name for p in modules() if p.name != "__init__.py")
