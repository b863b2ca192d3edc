"""The progress of a long job (``predict``, ``standard_eval``), twice: a line in its log for people::

    progress: 1200/50000 images, 8123.4 crops/s, 22.56 images/s, ETA 0:36:03

and the same as a JSON record, one a line, in a file beside the log (:func:`records_path`, written by the handler
:func:`zoomeval.core.logs.to_file` installs), which ``zoomeval run`` reads (:func:`last_record`) for a bar per
running job and the run's own totals::

    {"time": 1796220974.5, "done": 1200, "total": 50000, "crops": 388800, "views": 324, "crops_per_second": 8123.4,
     "eta": 2163.0}

Images are those the job computes in this run (a rerun that reuses finished shards counts only the others); the
rate is the mean since the job's first image, and the ETA (seconds, ``null`` before any image) the crops left at
that rate.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TextIO

#: Seconds between progress lines in a job's log (a line also ends each shard and the job).
PROGRESS_SECONDS = 10.0
#: The records file of a job's log: the log's path with this appended.
RECORDS_SUFFIX = ".progress.jsonl"
#: The attribute of a log record that carries a progress record (``extra=``).
RECORD_ATTRIBUTE = "zoomeval_progress"
#: Bytes read from the end of a records file to find its last record.
_TAIL_BYTES = 4096


@dataclass(frozen=True)
class Progress:
    """A job's progress: ``done`` of ``total`` images (``crops`` crops of ``views`` per image) at
    ``crops_per_second``; ``eta``: seconds left, or None."""

    done: int
    total: int
    crops_per_second: float
    eta: float | None
    crops: int = 0
    views: int = 1


def format_eta(seconds: float | None) -> str:
    """``H:MM:SS`` (rounded up to the second), or ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = int(-(-seconds // 1))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def format_line(progress: Progress) -> str:
    """The log line of ``progress``."""
    return (
        f"progress: {progress.done}/{progress.total} images, {progress.crops_per_second:.1f} crops/s, "
        f"{progress.crops_per_second / progress.views:.2f} images/s, ETA {format_eta(progress.eta)}"
    )


def records_path(log: str | os.PathLike[str]) -> str:
    """The progress records file beside a job's log."""
    return os.fspath(log) + RECORDS_SUFFIX


class RecordsHandler(logging.Handler):
    """Writes the progress record of each log record that carries one (:data:`RECORD_ATTRIBUTE`) to ``path``, a
    JSON object a line, flushed at once; the file is created with the first record."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.stream: TextIO | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if (progress := getattr(record, RECORD_ATTRIBUTE, None)) is None:
            return
        if self.stream is None:
            self.stream = open(self.path, "w", encoding="utf-8")
        self.stream.write(json.dumps({"time": record.created, **asdict(progress)}) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        super().close()


def last_record(path: str | os.PathLike[str]) -> Progress | None:
    """The last complete record of a records file (read from its end), or None if it has none (yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - _TAIL_BYTES))
            lines = fh.read().decode("utf-8", "replace").split("\n")[:-1]  # the last, unended line is being written
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        try:
            fields = json.loads(line)
            return Progress(**{key: fields[key] for key in Progress.__dataclass_fields__})
        except (ValueError, KeyError, TypeError):
            continue  # the first line of a tail read may be cut
    return None


class ProgressLog:
    """Counts a job's crops and logs its progress every :data:`PROGRESS_SECONDS` (and on :meth:`line`)."""

    def __init__(
        self, images: int, views: int, logger: logging.Logger, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.images, self.views, self.crops, self.logger, self.clock = images, views, 0, logger, clock
        self.start = self.last = clock()

    def progress(self) -> Progress:
        """Images done (whole images: ``crops // views``), the rate since the start and the ETA at that rate."""
        elapsed = self.clock() - self.start
        rate = self.crops / elapsed if elapsed > 0 else 0.0
        left = self.images * self.views - self.crops
        return Progress(
            self.crops // self.views, self.images, rate, left / rate if rate else None, self.crops, self.views
        )

    def advance(self, crops: int) -> None:
        self.crops += crops
        if self.clock() - self.last >= PROGRESS_SECONDS:
            self.line()

    def line(self, note: str = "") -> None:
        """Log the progress now (the end of a shard, of the job), ``note`` in brackets after it."""
        self.last, progress = self.clock(), self.progress()
        text = format_line(progress) + (f" ({note})" if note else "")
        self.logger.info(text, extra={RECORD_ATTRIBUTE: progress})
