"""``zoomeval run``: the study held (:mod:`zoomeval.run.lock`), the preflight (:mod:`zoomeval.run.plan`), then
Snakemake as a subprocess with this machine's cores and GPUs, its console output in a log file of this run's own,
its events read back (:mod:`zoomeval.run.events`) for the progress display (:mod:`zoomeval.run.display`); at the
end what was built and what was not (:mod:`zoomeval.run.summary`). Its exit status is Snakemake's (130 when
interrupted).

Snakemake runs in a session of its own, so a Ctrl-C reaches ``zoomeval run`` only: the first is passed on to
Snakemake and its jobs as a terminal would (Snakemake stops its jobs and cleans up; a ``predict`` job keeps its
finished shards), the second kills them all at once (and removes the locks that Snakemake left). Their tracebacks
go to the run's log, never to the screen."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from zoomeval.core.cells import terminal_text
from zoomeval.core.progress import Progress
from zoomeval.core.zoom import ZoomGrid
from zoomeval.run.display import TRACKED, Display, crops_text
from zoomeval.run.events import EventReader, RunState
from zoomeval.run.lock import holding
from zoomeval.run.overall import Tracker, planned_work
from zoomeval.run.plan import CONFIG, RunPlan, environment, plan_run
from zoomeval.run.settings import Setting
from zoomeval.run.summary import summary

#: The stem of each run's files under the run's logs root: ``zoomeval-run.<time>.<pid>.log`` (Snakemake's console
#: output) and ``.events.jsonl`` beside it (its events); a run never writes another run's.
RUN_FILES = "zoomeval-run"
#: Seconds between redraws of the display.
REFRESH_SECONDS = 0.5
#: Snakemake's lock files, under the study directory.
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
#: The exit status of an interrupted run.
INTERRUPTED = 130


def run_files(plan: RunPlan) -> tuple[Path, Path]:
    """This run's log and events files (new names: created exclusively, never truncating another run's)."""
    stem = Path(plan.layout.logs) / f"{RUN_FILES}.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    return Path(f"{stem}.log"), Path(f"{stem}.events.jsonl")


class Follower:
    """Reads a run's events and its jobs' progress, and redraws the display."""

    def __init__(self, plan: RunPlan, events: Path, display: Display) -> None:
        self.reader, self.display, self.state = EventReader(events), display, RunState()
        views = ZoomGrid(plan.config.scales).n_views()
        self.tracker = Tracker(planned_work(plan.config, plan.layout), views)
        self.known: dict[int, Progress] = {}  # every tracked job's last record, finished jobs' too
        self.final: set[int] = set()  # the finished jobs whose last record has been read

    def step(self) -> None:
        for event in self.reader.read():
            self.state.feed(event)
        self.known.update(self.display.records(self.state))
        for jobid, job in self.state.jobs.items():
            if job.ended is not None and job.rule in TRACKED and jobid not in self.final:
                self.final.add(jobid)
                if (last := self.display.progress_of(job)) is not None:
                    self.known[jobid] = last
        overall = self.tracker.overall(self.state, self.known, time.time())
        self.display.update(self.state, overall, {j: p for j, p in self.known.items() if j in self.state.running})


def _signal(process: subprocess.Popen[bytes], which: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, which)  # Snakemake's session: it and every job it started


@contextlib.contextmanager
def stops_as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP (a ``kill``, a closed terminal) count as Ctrl-C while the block runs, unless ignored
    (``nohup``): Snakemake, in a session of its own, would not get them."""
    kept = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for which, handler in kept.items():
        if handler == signal.SIG_DFL:
            signal.signal(which, signal.default_int_handler)
    try:
        yield
    finally:
        for which, handler in kept.items():
            signal.signal(which, handler)


def supervise(process: subprocess.Popen[bytes], step: Callable[[], None], screen: TextIO) -> tuple[int, int]:
    """Call ``step`` every :data:`REFRESH_SECONDS` until ``process`` ends; the first Ctrl-C (or SIGTERM, SIGHUP) is
    passed on to its process group as SIGINT, the second kills the group. Its exit status and the Ctrl-Cs seen."""
    with stops_as_ctrl_c():
        return _supervise(process, step, screen)


def _supervise(process: subprocess.Popen[bytes], step: Callable[[], None], screen: TextIO) -> tuple[int, int]:
    interrupts = 0
    while True:
        try:
            ended = process.poll() is not None
            step()
            if ended:
                return process.returncode, interrupts
            time.sleep(REFRESH_SECONDS)
        except KeyboardInterrupt:
            interrupts += 1
            if interrupts == 1:
                _signal(process, signal.SIGINT)
                print(
                    "\nzoomeval run: interrupted: Snakemake is stopping its jobs (Ctrl-C again to stop at once)",
                    file=screen,
                )
            else:
                _signal(process, signal.SIGKILL)
                print("\nzoomeval run: stopped at once", file=screen)
        if interrupts > 1:
            with contextlib.suppress(KeyboardInterrupt):
                process.wait()
            return process.wait(), interrupts


def lock_files() -> set[Path]:
    return set(SNAKEMAKE_LOCKS.glob("*.lock")) if SNAKEMAKE_LOCKS.is_dir() else set()


def run(plan: RunPlan, screen: TextIO = sys.stderr) -> tuple[int, RunState, Path]:
    """Start Snakemake for ``plan`` and show its progress on ``screen``; its exit status (:data:`INTERRUPTED` if
    interrupted), final state and log."""
    log, events = run_files(plan)
    argv, env, before = plan.argv(str(events)), environment(), lock_files()
    if (settings := plan.settings_line()) is not None:  # the config is not the file's: said first, on both
        print(terminal_text(settings), file=screen)
    print(f"running: snakemake {shlex.join(argv[3:])} (its output: {log})", file=screen)
    print(crops_text(ZoomGrid(plan.config.scales)), file=screen)
    display = Display(screen)
    follower = Follower(plan, events, display)
    with open(log, "xb") as out:
        if settings is not None:
            out.write(f"{settings}\n".encode())
            out.flush()  # before Snakemake's own output, which it writes to the same file
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            status, interrupts = supervise(process, follower.step, screen)
        finally:
            display.close()
    if interrupts > 1:  # killed: its locks are this run's Snakemake's, which is gone
        for stale in lock_files() - before:
            stale.unlink(missing_ok=True)
    return (INTERRUPTED if interrupts else status), follower.state, log


def run_study(
    directory: Path,
    targets: Sequence[str],
    limit: int | None,
    cores: int | None,
    report: bool = False,
    settings: Sequence[Setting] = (),
) -> int:
    """``zoomeval run``: hold the study, preflight (with the ``--set`` ``settings`` applied to its config), run,
    summary; the exit status (2 for the preflight's problems)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is no directory: give a study directory (zoomeval init)")
    if not (directory / CONFIG).is_file():
        raise FileNotFoundError(f"{directory / CONFIG} does not exist: give a study directory (zoomeval init)")
    with holding(directory, shlex.join(["zoomeval", *sys.argv[1:]])), contextlib.chdir(directory):
        plan, found = plan_run(targets, limit, cores, report, settings)
        if found:
            for problem in found:
                print(f"zoomeval run: {problem}", file=sys.stderr)
            print(f"zoomeval run: {len(found)} problem(s) found before starting; nothing was run", file=sys.stderr)
            return 2
        status, state, log = run(plan)
        print("\n".join(summary(plan, state, status, log, shlex.quote(str(directory)))))
    return status
