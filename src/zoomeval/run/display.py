"""The progress display of ``zoomeval run``, drawn with tqdm: the overall count of jobs done, and one bar per running
``predict`` or ``standard_eval`` job (images done of its total, crops/s and the ETA its log reports,
:mod:`zoomeval.core.progress`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

from zoomeval.core.progress import Progress, format_eta, last_progress
from zoomeval.run.snakemake_log import Job, SnakemakeLog

#: The rules whose jobs log progress lines (zoomeval.inference.predict, .standard_eval).
TRACKED = ("predict", "standard_eval")
JOB_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n}/{total} images{postfix}"  # tqdm puts ", " before the postfix
OVERALL_BAR = "{desc}: {n}/{total} jobs done |{bar}|"


def job_progress(job: Job) -> Progress | None:
    """The last progress line of a job's (first) log file."""
    return last_progress(job.logs[0]) if job.logs else None


def postfix(progress: Progress) -> str:
    """``8123.4 crops/s, ETA 0:36:03``."""
    return f"{progress.crops_per_second:.1f} crops/s, ETA {format_eta(progress.eta)}"


class Display:
    """Bars on ``file``, redrawn by :meth:`update` from a run's state; ``progress_of`` reads a job's progress."""

    def __init__(self, file: TextIO, progress_of: Callable[[Job], Progress | None] = job_progress) -> None:
        self.file, self.progress_of = file, progress_of
        self.overall = tqdm(total=0, desc="zoomeval run", file=file, bar_format=OVERALL_BAR, dynamic_ncols=True)
        self.bars: dict[int, tqdm] = {}

    def update(self, state: SnakemakeLog) -> None:
        """Redraw what changed (a log file, or a terminal that is no terminal, gets a line per change only)."""
        if (self.overall.total, self.overall.n) != (state.total or 0, state.done):
            self.overall.total, self.overall.n = state.total or 0, state.done
            self.overall.refresh()
        for jobid in [j for j in self.bars if j not in state.running]:
            self.bars.pop(jobid).close()
        for jobid, job in state.running.items():
            if job.rule in TRACKED and (progress := self.progress_of(job)) is not None:
                self._draw(jobid, job, progress)

    def _draw(self, jobid: int, job: Job, progress: Progress) -> None:
        if jobid not in self.bars:
            self.bars[jobid] = tqdm(total=progress.total, desc=job.label, file=self.file, bar_format=JOB_BAR,
                                    leave=False, dynamic_ncols=True)  # fmt: skip
        bar, text = self.bars[jobid], postfix(progress)
        if (bar.total, bar.n, bar.postfix) != (progress.total, progress.done, text):
            bar.total, bar.n = progress.total, progress.done
            bar.set_postfix_str(text)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.overall.close()
