"""The progress lines of a long job (``predict``, ``standard_eval``) in its log, in one stable form that
``zoomeval run`` reads back (:func:`parse_line`) to draw a bar per running job::

    progress: 1200/50000 images, 8123.4 crops/s, 22.56 images/s, ETA 0:36:03

Images are those the job computes in this run (a rerun that reuses finished shards counts only the others); the
rate is the mean since the job's first image, and the ETA the images left at that rate (``?`` before any image).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: Seconds between progress lines in a job's log (a line also ends each shard and the job).
PROGRESS_SECONDS = 10.0
_LINE = re.compile(
    r"progress: (?P<done>\d+)/(?P<total>\d+) images, (?P<rate>[0-9.]+) crops/s, [0-9.]+ images/s, "
    r"ETA (?P<eta>\d+:\d\d:\d\d|\?)"
)
#: Bytes read from the end of a log to find its last progress line.
_TAIL_BYTES = 16384


@dataclass(frozen=True)
class Progress:
    """A job's progress: ``done`` of ``total`` images at ``crops_per_second``; ``eta``: seconds left, or None."""

    done: int
    total: int
    crops_per_second: float
    eta: float | None


def format_eta(seconds: float | None) -> str:
    """``H:MM:SS`` (rounded up to the second), or ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = int(-(-seconds // 1))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _parse_eta(text: str) -> float | None:
    if text == "?":
        return None
    hours, minutes, seconds = map(int, text.split(":"))
    return float(hours * 3600 + minutes * 60 + seconds)


def format_line(progress: Progress, views: int) -> str:
    """The log line of ``progress`` (``views``: crops per image, for the images/s)."""
    return (f"progress: {progress.done}/{progress.total} images, {progress.crops_per_second:.1f} crops/s, "
            f"{progress.crops_per_second / views:.2f} images/s, ETA {format_eta(progress.eta)}")  # fmt: skip


def parse_line(line: str) -> Progress | None:
    """The progress a log line reports (anywhere in it: the log's formatter prefixes a time), or None."""
    match = _LINE.search(line)
    if match is None:
        return None
    done, total = int(match["done"]), int(match["total"])
    return Progress(done, total, float(match["rate"]), _parse_eta(match["eta"]))


def last_progress(log: str | Path) -> Progress | None:
    """The last progress line of a job's log (read from its end), or None if it has none (yet)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - _TAIL_BYTES))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return None
    return next((p for line in reversed(lines) if (p := parse_line(line)) is not None), None)


class ProgressLog:
    """Counts a job's crops and logs a progress line every :data:`PROGRESS_SECONDS` (and on :meth:`line`)."""

    def __init__(self, images: int, views: int, logger: logging.Logger,
                 clock: Callable[[], float] = time.perf_counter) -> None:  # fmt: skip
        self.images, self.views, self.crops, self.logger, self.clock = images, views, 0, logger, clock
        self.start = self.last = clock()

    def progress(self) -> Progress:
        """Images done (whole images: ``crops // views``), the rate since the start and the ETA at that rate."""
        elapsed = self.clock() - self.start
        rate = self.crops / elapsed if elapsed > 0 else 0.0
        left = self.images * self.views - self.crops
        return Progress(self.crops // self.views, self.images, rate, left / rate if rate else None)

    def advance(self, crops: int) -> None:
        self.crops += crops
        if self.clock() - self.last >= PROGRESS_SECONDS:
            self.line()

    def line(self, note: str = "") -> None:
        """Log the progress now (the end of a shard, of the job), ``note`` in brackets after it."""
        self.last = self.clock()
        self.logger.info(format_line(self.progress(), self.views) + (f" ({note})" if note else ""))
