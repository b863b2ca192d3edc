"""What ``zoomeval run`` may build: its TARGETs are data, never options. A target is a rule the workflow exports
for it (:data:`TARGET_RULES`) or a path of the declared results layout (:mod:`zoomeval.core.layout`) under the
run's results root; anything else is refused, naming it, before anything starts, and the targets reach Snakemake
after ``--``, where no word is read as an option. Also what each target builds (:func:`products`), which the
end-of-run summary reports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from zoomeval.core.config import Config
from zoomeval.core.layout import OUTPUTS, RESULTS, Layout

#: The rules a study exports as targets (rules without wildcards, in the workflow's Snakefile), with what they build.
TARGET_RULES = {
    "study": "every table and the sealed study index (study.json), which `zoomeval leaderboard` reads",
    "all": "the study, then the figures, contact sheets, statistics, image browser and hard sets",
}
#: The target of a plain ``zoomeval run``.
DEFAULT_TARGET = "study"
#: The tables of every study (a config adds the ImageNet-Hard and multi-label tables, :func:`study_tables`).
TABLES = ("table_a8", "table_1", "table_zoom_groups", "table_aggregation", "table_zoom_policies")
#: A table's formats; other outputs' ``ext`` takes these too (the leaderboard's html).
EXTENSIONS = ("csv", "md", "html")
#: Outputs that match any file name and so name no output of their own (each table has its own name).
_GENERIC = ("table",)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def study_tables(config: Config) -> tuple[str, ...]:
    """The tables the ``study`` target builds for ``config`` (output names of the layout; ``all`` builds them too):
    the ImageNet-Hard table with an ``imagenet_hard`` dataset, the multi-label table with a dataset scored with the
    ``multilabel`` label set."""
    hard = any(entry.adapter == "imagenet_hard" for entry in config.datasets.values())
    multilabel = any("multilabel" in entry.label_sets for entry in config.datasets.values())
    return TABLES + ("table_imagenet_hard",) * hard + ("table_multilabel",) * multilabel


def limited_target(target: str, results: str) -> str:
    """A target under ``results/`` moved under a limited run's results root (others unchanged)."""
    if results == RESULTS or not target.startswith(f"{RESULTS}/") or target.startswith(f"{results}/"):
        return target
    return results + target[len(RESULTS) :]


def layout_output(path: str, layout: Layout) -> str | None:
    """The name of the layout's output that ``path`` is (under ``layout``'s results root), or None."""
    for name in OUTPUTS:
        values = layout.parse(name, path) if name not in _GENERIC else None
        if values is not None and values.get("ext", EXTENSIONS[0]) in EXTENSIONS:
            return name
    return None


def checked_target(target: str, layout: Layout) -> str:
    """``target`` as Snakemake gets it: a target rule as it is, a path moved under a limited run's root; anything
    else (an option, a path outside the layout or with ``..``, a control character) is refused, naming it."""
    if target in TARGET_RULES:
        return target
    path = limited_target(target, layout.root)
    parts = PurePosixPath(path).parts
    if not _CONTROL.search(path) and ".." not in parts and layout_output(path, layout) is not None:
        return str(PurePosixPath(path))
    rules = ", ".join(f"`{rule}`" for rule in TARGET_RULES)
    raise ValueError(
        f"TARGET {target!r} is neither a target rule ({rules}) nor a path of the results layout under "
        f"{layout.root}/ (docs/reference/outputs.md); nothing was run"
    )


def checked_targets(targets: Sequence[str], layout: Layout) -> tuple[str, ...]:
    """Every target checked (:func:`checked_target`); none given: the default target."""
    return tuple(checked_target(t, layout) for t in targets) or (DEFAULT_TARGET,)


def products(targets: Sequence[str], config: Config, layout: Layout) -> dict[str, list[str]]:
    """What ``targets`` build, by product (``tables``, ``study index``, ``browser``, ``figures and the rest``, or
    a path target's own output name), each with its paths under ``layout``."""
    found: dict[str, list[str]] = {}
    for target in targets:
        if target in TARGET_RULES:
            found["tables"] = [layout.path(t, ext=ext) for t in study_tables(config) for ext in ("md", "csv")]
            found["study index"] = [layout.path("study_index")]
        if target == "all":
            found["browser"] = [layout.path("browser")]
            found["figures, contact sheets, statistics and hard sets"] = []
        elif target not in TARGET_RULES:
            found.setdefault(layout_output(target, layout) or target, []).append(target)
    return found
