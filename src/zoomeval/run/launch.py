"""``zoomeval run``: the preflight (:mod:`zoomeval.preflight`), then Snakemake as a subprocess with this machine's
cores and GPUs, its console output in a log file and a progress display on screen (:mod:`zoomeval.run.display`);
at the end Table A8 and where the browser, the report and the logs are. Its exit status is Snakemake's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from zoomeval.core.devices import gpus_at_most
from zoomeval.core.layout import RESULTS, Layout, run_layout
from zoomeval.core.strict_yaml import load_yaml, refuse_templating
from zoomeval.preflight import problems
from zoomeval.registries import load_config
from zoomeval.run.display import Display
from zoomeval.run.snakemake_log import SnakemakeLog

#: The study's config, as `zoomeval init` writes it and the study's Snakefile reads it.
CONFIG = Path("config") / "config.yaml"
#: The YAML files Snakemake reads in a study before any workflow code runs, rendering a ``__use_yte__`` template's
#: Python expressions: the config, and the workflow profile it finds beside the study's Snakefile.
SNAKEMAKE_YAML = (CONFIG, Path("profiles") / "default" / "config.yaml")
#: Snakemake's console output, under the run's logs root.
SNAKEMAKE_LOG = "zoomeval-run.log"
#: Lines of Snakemake's output shown when it fails without a failed job to name.
TAIL_LINES = 12
#: Seconds between redraws of the display.
REFRESH_SECONDS = 0.5


@dataclass(frozen=True)
class RunPlan:
    """What ``zoomeval run`` starts: targets, the run's layout (its results and logs roots, relative to the study
    directory), limit, cores and GPUs."""

    targets: tuple[str, ...]
    layout: Layout
    limit: int | None
    cores: int
    gpus: int

    def argv(self) -> list[str]:
        """Snakemake's command line (a list: nothing is parsed by a shell)."""
        argv = [sys.executable, "-m", "snakemake", *self.targets, "--cores", str(self.cores)]
        argv += ["--resources", f"gpu={self.gpus}"]  # the targets first: --config and --resources take a list
        return argv + (["--config", f"limit={self.limit}"] if self.limit is not None else [])


def limited_target(target: str, results: str) -> str:
    """A target under ``results/`` moved under a limited run's results root (others unchanged)."""
    if results == RESULTS or not target.startswith(f"{RESULTS}/") or target.startswith(f"{results}/"):
        return target
    return results + target[len(RESULTS) :]


def plan_run(targets: Sequence[str], limit: int | None, cores: int | None) -> tuple[RunPlan, list[str]]:
    """The run in the current directory (a study's), and the problems the preflight finds in it."""
    if not CONFIG.is_file():
        raise FileNotFoundError(f"{Path.cwd() / CONFIG} does not exist: give a study directory (zoomeval init)")
    for path in SNAKEMAKE_YAML:
        refuse_templating(path)
    raw = load_yaml(CONFIG)
    if limit is not None:
        raw["limit"] = limit
    config = load_config(raw, check_paths=False)  # missing files are the preflight's, all of them at once
    layout = run_layout(config.limit)
    chosen = tuple(limited_target(t, layout.root) for t in targets) or (layout.path("table_a8", ext="csv"),)
    plan = RunPlan(chosen, layout, config.limit, cores or len(os.sched_getaffinity(0)), gpus_at_most() or 0)
    return plan, problems(config, layout)


def follow(process: subprocess.Popen[bytes], log: Path, display: Display, state: SnakemakeLog) -> None:
    """Feed Snakemake's log to ``state`` and redraw ``display`` until ``process`` ends."""
    pending = ""
    with open(log, encoding="utf-8", errors="replace") as fh:
        while True:
            ended = process.poll() is not None
            *lines, pending = (pending + fh.read()).split("\n")  # a partial last line waits for its end
            for line in lines:
                state.feed(line)
            display.update(state)
            if ended:
                return
            time.sleep(REFRESH_SECONDS)


def summary(plan: RunPlan, state: SnakemakeLog, status: int) -> list[str]:
    """What the run prints at its end: Table A8 (Markdown), then the paths of the browser, report and logs."""
    table, browser = Path(plan.layout.path("table_a8", ext="md")), Path(plan.layout.path("browser"))
    wanted = {"all", str(table), str(table.with_suffix(".csv"))} & set(plan.targets)  # not an older run's table
    built = status == 0 and table.is_file() and bool(wanted)
    lines = [table.read_text()] if built else []
    lines += [f"failed: {job.label}: {', '.join(job.logs)}" for job in state.failed]
    if status != 0 and not state.failed:  # Snakemake stopped before or between jobs: its own last words
        output = Path(plan.layout.logs, SNAKEMAKE_LOG).read_text(errors="replace").splitlines()
        lines += [line for line in output if line.strip()][-TAIL_LINES:]
    if built:
        lines.append(f"Table A8: {table} and {table.with_suffix('.csv')}")
    lines.append(f"browser: {browser}" if browser.is_file() else "browser: not built (target `all` builds it)")
    config = f" --config limit={plan.limit}" if plan.limit is not None else ""
    lines.append(f"report: snakemake --report {plan.layout.root}/report.html{config} (once `all` is built)")
    lines.append(f"logs: {plan.layout.logs}/ (Snakemake's own output: {plan.layout.logs}/{SNAKEMAKE_LOG})")
    return lines


def run(plan: RunPlan, screen: TextIO = sys.stderr) -> tuple[int, SnakemakeLog]:
    """Start Snakemake for ``plan`` and show its progress on ``screen``; its exit status (130 if interrupted while
    it ended well) and final state."""
    log = Path(plan.layout.logs, SNAKEMAKE_LOG)
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"running: snakemake {' '.join(plan.argv()[3:])} (its output: {log})", file=screen)
    display, state = Display(screen), SnakemakeLog()
    with open(log, "wb") as out, subprocess.Popen(plan.argv(), stdout=out, stderr=subprocess.STDOUT) as process:
        try:
            follow(process, log, display, state)
        except KeyboardInterrupt:  # Snakemake got the same signal (one process group): it stops its jobs
            print("zoomeval run: interrupted; waiting for Snakemake to stop", file=screen)
            return process.wait() or 130, state
        finally:
            display.close()
    return process.returncode, state


def run_study(directory: Path, targets: Sequence[str], limit: int | None, cores: int | None) -> int:
    """``zoomeval run``: preflight, run, summary; the exit status (2 for the preflight's problems)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is no directory: give a study directory (zoomeval init)")
    with contextlib.chdir(directory):
        plan, found = plan_run(targets, limit, cores)
        if found:
            for problem in found:
                print(f"zoomeval run: {problem}", file=sys.stderr)
            print(f"zoomeval run: {len(found)} problem(s) found before starting; nothing was run", file=sys.stderr)
            return 2
        status, state = run(plan)
        print("\n".join(summary(plan, state, status)))
    return status
