"""No import cycle in the package: every import counts, at the top, inside a function or under
``TYPE_CHECKING`` (a lazy import back is still a cycle, only one that fails later)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "zoomeval"


def module_name(path: Path, package: Path) -> str:
    return ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` and the package's modules it imports (``from a import b`` counts ``a.b`` where
    that is a module). The package's own ``__init__`` is left out: it only names lazy attributes."""
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        graph[name] = {t for t in targets if t in paths and t not in (name, package.name)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The sets of modules that import each other, directly or through others (the graph's strongly connected
    components of more than one module): ``a`` and ``b`` are in one where each reaches the other."""
    reach = {m: _reachable(graph, m) for m in graph}
    found: list[set[str]] = []
    for m in sorted(graph):
        group = {n for n in reach[m] if m in reach[n]} | {m}
        if len(group) > 1 and group not in found:
            found.append(group)
    return found


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for n in graph[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return seen


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 100  # every module of the package, subpackages included
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_a_lazy_import_back_is_a_cycle(tmp_path: Path) -> None:
    """Control: ``a`` imports ``b`` at the top, ``b`` imports ``a`` inside a function and under TYPE_CHECKING;
    ``c`` only imports ``a`` and is in no cycle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert cycles(import_graph(package)) == [{"pkg.a", "pkg.b"}]
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    assert cycles(import_graph(package)) == [{"pkg.a", "pkg.b"}]
    (package / "b.py").write_text("")
    assert cycles(import_graph(package)) == []
