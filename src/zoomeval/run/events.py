"""What a Snakemake run is doing, from its own events (the JSON lines :mod:`zoomeval.run.logger_plugin` writes): the
jobs planned per rule, each job's rule, wildcards, logs and when it started and ended, the failed jobs, the steps
done of the total and the workflow's errors."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Job:
    """A job Snakemake started: its rule, wildcards and log files, and when it started and ended (seconds since
    the epoch, Snakemake's clock)."""

    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    started: float | None = None
    ended: float | None = None

    @property
    def label(self) -> str:
        """``predict demo/original/resnet50``: the rule and its wildcards' values."""
        return " ".join([self.rule, "/".join(self.wildcards.values())]).strip()


@dataclass
class RunState:
    """The state of a run, fed its events one by one (:meth:`feed`)."""

    planned: dict[str, int] = field(default_factory=dict)
    total: int | None = None
    done: int = 0
    jobs: dict[int, Job] = field(default_factory=dict)
    running: set[int] = field(default_factory=set)
    failed: list[Job] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _starts: dict[int, float] = field(default_factory=dict)

    def feed(self, event: dict[str, Any]) -> None:
        kind, when = event.get("event"), event.get("time")
        if kind == "run_info":
            stats = dict(event.get("stats") or {})
            self.total = stats.pop("total", self.total)
            self.planned = stats
        elif kind == "job_started":
            for jobid in event.get("jobs") or []:
                self._starts[jobid] = when
                self.running.add(jobid)
                if jobid in self.jobs:
                    self.jobs[jobid].started = when
        elif kind == "job_info":
            jobid = event["jobid"]
            wildcards = {str(k): str(v) for k, v in (event.get("wildcards") or {}).items()}
            logs = [str(log) for log in event.get("log") or []]
            self.jobs[jobid] = Job(str(event["rule_name"]), wildcards, logs, self._starts.get(jobid))
        elif kind in ("job_finished", "job_error"):
            self._ended(event, when)
        elif kind == "progress":
            self.done, self.total = int(event["done"]), int(event["total"])
        elif kind == "error":
            self.errors.append(str(event.get("message") or event.get("exception")))

    def _ended(self, event: dict[str, Any], when: float | None) -> None:
        jobid = event["job_id"] if event["event"] == "job_finished" else event["jobid"]
        self.running.discard(jobid)
        job = self.jobs.setdefault(jobid, Job(str(event.get("rule_name")), logs=list(event.get("log") or [])))
        job.ended = when
        if event["event"] == "job_error":
            self.failed.append(job)


class EventReader:
    """The events appended to a JSON-lines file since the last :meth:`read` (a line still being written waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.decode("utf-8").splitlines() if line]
