"""The progress of a whole run: jobs done of the total (Snakemake's count), the images and crops its ``predict``
jobs have computed of the total, and one ETA for the run.

The images a ``predict`` job will compute come from its progress records once it runs (:mod:`zoomeval.core.progress`)
and, before, from the plan of the prediction files not yet written (:func:`planned_work`, the count the disk
estimate uses). The plan is used only when it has as many ``predict`` jobs as Snakemake plans (every target that
needs every prediction file, as ``study`` and ``all`` do); otherwise a total is unknown (``?``) until every
``predict`` job has started.

The ETA is the crops left at the rate the running ``predict`` jobs report (the last such rate between them),
plus, for every other job not yet finished (a ``predict`` job not yet running counts as one too, for its start),
the mean wall time of the finished jobs other than ``predict``, divided by the number of jobs that have been
running at once on average; ``?`` until both are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

from zoomeval.core.config import Config
from zoomeval.core.layout import Layout
from zoomeval.core.progress import Progress, format_eta
from zoomeval.preflight import expected_images
from zoomeval.run.events import Job, RunState

#: A predict job's key: dataset, variant, model and part ('' without parts).
Key = tuple[str, str, str, str]
#: The rule whose jobs compute the run's images and crops.
PREDICT = "predict"


def planned_work(config: Config, layout: Layout) -> dict[Key, int | None]:
    """The images each ``predict`` job will compute, for the prediction files not yet written (None: unknown
    before the dataset's manifest)."""
    from pathlib import Path

    from zoomeval.inference.parts import part_range

    parts, work = config.inference.parts, {}
    for name, dataset in config.datasets.items():
        images = expected_images(config, name, layout)
        for variant in dataset.variants:
            for model in config.models:
                if Path(layout.path("predictions", dataset=name, variant=variant, model=model)).is_file():
                    continue
                for part in range(parts) if parts > 1 else [None]:
                    count = (
                        images
                        if images is None or part is None
                        else len(part_range(images, config.inference.shard_images, part, parts))
                    )
                    work[name, variant, model, "" if part is None else str(part)] = count
    return work


def key_of(job: Job) -> Key:
    values = job.wildcards
    return values.get("dataset", ""), values.get("variant", ""), values.get("model", ""), values.get("part", "")


@dataclass(frozen=True)
class Overall:
    """A run's progress: jobs, images and crops done of their totals (None: unknown), and its ETA in seconds."""

    jobs: int
    jobs_total: int | None
    images: int
    images_total: int | None
    crops: int
    crops_total: int | None
    eta: float | None

    def text(self) -> str:
        """``7/14 jobs, 24/48 images, 648/1,296 crops, ETA 0:03:10`` (no images without predict jobs)."""

        def of(done: int, total: int | None) -> str:
            return f"{done:,}/{'?' if total is None else f'{total:,}'}"

        parts = [f"{of(self.jobs, self.jobs_total)} jobs"]
        if self.images_total != 0:
            parts += [f"{of(self.images, self.images_total)} images", f"{of(self.crops, self.crops_total)} crops"]
        return ", ".join([*parts, f"ETA {format_eta(self.eta)}"])


class Tracker:
    """The run's :class:`Overall` from its state, the predict jobs' records and the plan (``views``: crops per
    image, for the plan's crops)."""

    def __init__(self, planned: dict[Key, int | None], views: int) -> None:
        self.planned, self.views, self.rate = planned, views, 0.0

    def overall(self, state: RunState, records: dict[int, Progress], now: float) -> Overall:
        seen = {key_of(job): records.get(jobid) for jobid, job in state.jobs.items() if job.rule == PREDICT}
        unseen = [n for key, n in self.planned.items() if key not in seen]
        if len(self.planned) != state.planned.get(PREDICT, 0) and len(seen) < state.planned.get(PREDICT, 0):
            unseen = [None]  # the plan is not this run's: unknown until every predict job has started
        images = [(p.done, p.total, p.crops, p.total * p.views) for p in seen.values() if p is not None]
        waiting = [self.planned.get(key) for key, p in seen.items() if p is None] + unseen
        totals = None if None in waiting else sum(waiting)  # type: ignore[arg-type]
        images_total = None if totals is None else totals + sum(i[1] for i in images)
        crops_total = None if totals is None else totals * self.views + sum(i[3] for i in images)
        crops = sum(i[2] for i in images)
        eta = self.eta(state, records, None if crops_total is None else crops_total - crops, now)
        return Overall(state.done, state.total, sum(i[0] for i in images), images_total, crops, crops_total, eta)

    def eta(self, state: RunState, records: dict[int, Progress], crops_left: int | None, now: float) -> float | None:
        """The run's ETA (the module's docstring), or None while unknown."""
        running = [j for j in state.running if state.jobs.get(j, Job("")).rule == PREDICT and j in records]
        self.rate = sum(records[j].crops_per_second for j in running) or self.rate
        left = (state.total or 0) - state.done - len(running)
        finished = [
            j.ended - j.started
            for j in state.jobs.values()
            if j.rule != PREDICT and j.started is not None and j.ended is not None
        ]
        if crops_left is None or (crops_left and not self.rate) or (left > 0 and not finished):
            return None
        crops_seconds = crops_left / self.rate if crops_left else 0.0
        return crops_seconds + (left * mean(finished) / concurrency(state, now) if left > 0 else 0.0)


def concurrency(state: RunState, now: float) -> float:
    """The mean number of jobs that have been running at once since the first one started (at least 1)."""
    spans = [(job.started, job.ended or now) for job in state.jobs.values() if job.started is not None]
    if not spans:
        return 1.0
    elapsed = now - min(start for start, _ in spans)
    return max(1.0, sum(end - start for start, end in spans) / elapsed) if elapsed > 0 else 1.0
