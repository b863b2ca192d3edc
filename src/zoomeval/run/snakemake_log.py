"""What a Snakemake run is doing, read from its own console output (which ``zoomeval run`` sends to a log file):
the jobs started (``rule predict:`` blocks with their ``log:``, ``wildcards:`` and ``jobid:``), those finished
(``Finished jobid: N``) or failed (``Error in rule ...`` blocks), and the count of steps done (``N of M steps``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_RULE = re.compile(r"(?:local)?(?:rule|checkpoint) (?P<rule>\w+):$")
_ERROR = re.compile(r"Error in rule (?P<rule>\w+):$")
_FIELD = re.compile(r"\s+(?P<key>\w+): (?P<value>.*)$")  # input:, output:, log:, jobid:, ... of a block
_FINISHED = re.compile(r"Finished jobid: (?P<jobid>\d+)")
_STEPS = re.compile(r"(?P<done>\d+) of (?P<total>\d+) steps")
_TOTAL = re.compile(r"total\s+(?P<total>\d+)$")


@dataclass
class Job:
    """A job Snakemake started: its rule, wildcards (``name=value, ...``) and log files."""

    rule: str
    wildcards: str = ""
    logs: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``predict demo/original/resnet50``: the rule and its wildcards' values."""
        values = [item.partition("=")[2] for item in self.wildcards.split(", ") if item]
        return " ".join([self.rule, "/".join(values)]).strip()


@dataclass
class SnakemakeLog:
    """The state of a run, fed its console output line by line (:meth:`feed`)."""

    running: dict[int, Job] = field(default_factory=dict)
    failed: list[Job] = field(default_factory=list)
    done: int = 0
    total: int | None = None
    _block: Job | None = None
    _error: bool = False

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if (match := _RULE.match(line)) or (match := _ERROR.match(line)):
            self._block, self._error = Job(match["rule"]), line.startswith("Error")
        elif self._block is not None and (match := _FIELD.match(line)):
            self._field(self._block, match["key"], match["value"])
        else:
            self._block = None
            self._progress(line)

    def _field(self, job: Job, key: str, value: str) -> None:
        if key == "log":
            job.logs = value.removesuffix(" (check log file(s) for error details)").split(", ")  # an error block's
        elif key == "wildcards":
            job.wildcards = value
        elif key == "jobid" and self._error:
            self.failed.append(self.running.pop(int(value), job))
        elif key == "jobid":
            self.running[int(value)] = job

    def _progress(self, line: str) -> None:
        if match := _FINISHED.search(line):
            self.running.pop(int(match["jobid"]), None)
        elif match := _STEPS.search(line):
            self.done, self.total = int(match["done"]), int(match["total"])
        elif (match := _TOTAL.match(line)) and self.total is None:  # the job stats table, before any step is done
            self.total = int(match["total"])
