"""The progress display of ``zoomeval run``: the whole run (jobs, images and crops done of their totals and one ETA,
:mod:`zoomeval.run.overall`) and each running ``predict`` or ``standard_eval`` job (images done of its total,
crops/s and its ETA, from its progress records, :mod:`zoomeval.core.progress`).

On a terminal these are tqdm bars redrawn in place; anywhere else (a file, a pipe) plain lines, one when the run's
jobs or images done change and one when a job's record does, with no carriage return and no escape code."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

from zoomeval.core.progress import Progress, format_eta, last_record, records_path
from zoomeval.core.zoom import ZoomGrid
from zoomeval.run.events import Job, RunState
from zoomeval.run.overall import Overall

#: The rules whose jobs write progress records (zoomeval.inference.predict, .standard_eval).
TRACKED = ("predict", "standard_eval")
JOB_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n}/{total} images{postfix}"  # tqdm puts ", " before the postfix
OVERALL_BAR = "{desc}: |{bar}| {postfix}"
OVERALL = "zoomeval run"


def crops_text(grid: ZoomGrid) -> str:
    """What the crops counted per image are (shown before the run): the zoom transforms, and the aggregation methods'
    views where the 1-crop scale is there (``324 zoom crops + 9 aggregation views``, 333 in the counts)."""
    extra = grid.n_views() - grid.n_transforms
    views = f" + {extra} aggregation views (the 5- and 10-crop methods)" if extra else ""
    return f"crops per image: {grid.n_transforms} zoom crops{views}"


def job_progress(job: Job) -> Progress | None:
    """The last progress record of a job (beside its first log file)."""
    return last_record(records_path(job.logs[0])) if job.logs else None


def job_text(progress: Progress) -> str:
    """``120/500 images, 540.0 crops/s, ETA 0:00:32``."""
    return f"{progress.done}/{progress.total} images, {postfix(progress)}"


class Display:
    """The run's progress on ``file`` (bars on a terminal, plain lines elsewhere); ``progress_of`` reads a job's
    progress."""

    def __init__(self, file: TextIO, progress_of: Callable[[Job], Progress | None] = job_progress) -> None:
        self.file, self.progress_of, self.terminal = file, progress_of, file.isatty()
        self.overall: tqdm | None = None
        self.bars: dict[int, tqdm] = {}
        self.shown: dict[object, object] = {}  # what each plain line last said

    def records(self, state: RunState) -> dict[int, Progress]:
        """The latest progress of each running tracked job."""
        running = {j: state.jobs[j] for j in sorted(state.running) if j in state.jobs}
        return {j: p for j, job in running.items() if job.rule in TRACKED and (p := self.progress_of(job)) is not None}

    def update(self, state: RunState, overall: Overall, records: dict[int, Progress]) -> None:
        """Show what changed."""
        if self.terminal:
            self._bars(state, overall, records)
        else:
            self._lines(state, overall, records)

    def _lines(self, state: RunState, overall: Overall, records: dict[int, Progress]) -> None:
        if self.shown.get(OVERALL) != (overall.jobs, overall.jobs_total, overall.images):
            self.shown[OVERALL] = (overall.jobs, overall.jobs_total, overall.images)
            print(f"{OVERALL}: {overall.text()}", file=self.file, flush=True)
        for jobid, progress in records.items():
            if self.shown.get(jobid) != progress:
                self.shown[jobid] = progress
                print(f"{state.jobs[jobid].label}: {job_text(progress)}", file=self.file, flush=True)

    def _bars(self, state: RunState, overall: Overall, records: dict[int, Progress]) -> None:
        if self.overall is None:
            self.overall = tqdm(total=0, desc=OVERALL, file=self.file, bar_format=OVERALL_BAR, dynamic_ncols=True)
        self.overall.total, self.overall.n = overall.jobs_total or 0, overall.jobs
        self.overall.set_postfix_str(overall.text())
        for jobid in [j for j in self.bars if j not in records]:
            self.bars.pop(jobid).close()
        for jobid, progress in records.items():
            if jobid not in self.bars:
                self.bars[jobid] = tqdm(
                    total=progress.total,
                    desc=state.jobs[jobid].label,
                    file=self.file,
                    bar_format=JOB_BAR,
                    leave=False,
                    dynamic_ncols=True,
                )
            bar, text = self.bars[jobid], postfix(progress)
            if (bar.total, bar.n, bar.postfix) != (progress.total, progress.done, text):
                bar.total, bar.n = progress.total, progress.done
                bar.set_postfix_str(text)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        if self.overall is not None:
            self.overall.close()


def postfix(progress: Progress) -> str:
    """``540.0 crops/s, ETA 0:00:32``: a job bar's text after its images."""
    return f"{progress.crops_per_second:.1f} crops/s, ETA {format_eta(progress.eta)}"
