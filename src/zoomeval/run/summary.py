"""What ``zoomeval run`` prints at its end: Table A8 when this run built it, the jobs that failed (or Snakemake's own
last words when it stopped outside a job), then each product of a study, built or not, with the command that
builds what was not."""

from __future__ import annotations

import shlex
from pathlib import Path

from zoomeval.core.cells import terminal_text
from zoomeval.run.events import RunState
from zoomeval.run.plan import RunPlan
from zoomeval.run.settings import setting_text
from zoomeval.run.targets import DEFAULT_TARGET, products

#: Lines of Snakemake's output shown when it fails without a failed job to name.
TAIL_LINES = 12
#: Each product of a study that a target may build, and the arguments of ``zoomeval run`` that build it.
PRODUCTS = {
    "tables": [],
    "study index": [],
    "browser": ["all"],
    "figures, contact sheets, statistics and hard sets": ["all"],
}


def command(plan: RunPlan, directory: str, *args: str) -> str:
    """``zoomeval run DIR ARGS [--limit N] [--set KEY=VALUE ...]`` (this run's settings), quoted for the shell."""
    limit = ["--limit", str(plan.limit)] if plan.limit is not None else []
    settings = [word for setting in plan.settings for word in ("--set", setting_text(setting))]
    return shlex.join(["zoomeval", "run", directory, *args, *limit, *settings])


def built_lines(plan: RunPlan, directory: str, status: int) -> list[str]:
    """A line per product: its paths if this run built it (or found it up to date), else the command for it."""
    built = products(plan.targets, plan.config, plan.layout) if status == 0 else {}
    lines = []
    for name, paths in built.items():
        if name == "tables":
            shown = [p for p in paths if p.endswith(".md")]
            lines.append(f"built: the tables {', '.join(shown)} (each also as .csv)")
        elif name == "study index":
            lines.append(
                f"built: the study index {paths[0]} (sealed: `zoomeval leaderboard {directory}"
                f"{'' if plan.limit is None else f' --limit {plan.limit}'}` reads it)"
            )
        else:
            lines.append(f"built: {name}{': ' + ', '.join(paths) if paths else ''}")
    for name, args in PRODUCTS.items():
        if name not in built:
            lines.append(f"not built: {name} (`{command(plan, directory, *args)}`)")
    report = plan.layout.path("report")
    if plan.report and status == 0:
        lines.append(f"built: the report {report}")
    else:
        targets = [] if plan.targets == (DEFAULT_TARGET,) else list(plan.targets)
        lines.append(f"not built: the report (`{command(plan, directory, *targets, '--report')}`)")
    return lines


def summary(plan: RunPlan, state: RunState, status: int, log: Path, directory: str = ".") -> list[str]:
    """The end of a run (``directory``: the study as the user named it, for the commands)."""
    table = Path(plan.layout.path("table_a8", ext="md"))
    built = [path for paths in products(plan.targets, plan.config, plan.layout).values() for path in paths]
    wanted = str(table) in built or str(table.with_suffix(".csv")) in built
    lines = [table.read_text()] if status == 0 and wanted and table.is_file() else []
    lines += [f"failed: {job.label}: {', '.join(job.logs)}" for job in state.failed]
    if status != 0 and not state.failed:  # Snakemake stopped before or between jobs: its own last words
        output = log.read_text(errors="replace").splitlines() if log.is_file() else []
        lines += [terminal_text(line) for line in output if line.strip()][-TAIL_LINES:]
    lines += built_lines(plan, directory, status)
    lines.append(f"logs: {plan.layout.logs}/ (Snakemake's own output: {log})")
    return lines
