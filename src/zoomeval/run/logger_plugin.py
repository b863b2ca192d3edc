"""The Snakemake logger plugin ``zoomeval`` (``snakemake --logger zoomeval --logger-zoomeval-events FILE``):
Snakemake's own events (the jobs planned per rule, each job's start, end or failure, the step count, a workflow
error) as JSON lines in FILE, which ``zoomeval run`` reads back (:mod:`zoomeval.run.events`) instead of Snakemake's
console wording.

Snakemake finds it as the top-level package ``snakemake_logger_plugin_zoomeval``: its plugin registry scans
``sys.path`` for packages with that prefix (so an installed or a ``src``-on-the-path zoomeval both provide it). It
runs in Snakemake's main process only: the processes that run jobs (``--mode subprocess``, and a cluster's job
steps under ``--executor slurm``) skip plugin handlers and are given no ``--logger``, so the scheduler, local or
SLURM, is the file's one writer. This module imports nothing but the standard library and the plugin interface:
every Snakemake process imports it when it collects its plugins."""

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Optional

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

#: The fields kept of each event (snakemake_interface_logger_plugins.common.LogEvent), by the event's name.
FIELDS = {
    "run_info": ("stats",),
    "job_info": ("jobid", "rule_name", "wildcards", "log"),
    "job_started": ("jobs",),
    "job_finished": ("job_id",),
    "job_error": ("jobid", "rule_name", "log"),
    "progress": ("done", "total"),
    "error": ("exception",),
}


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    # no `from __future__ import annotations` here: Snakemake's settings parser reads the field types at run time
    events: Optional[str] = field(  # noqa: UP045 (the parser takes a typing.Optional, not str | None)
        default=None, metadata={"help": "the JSON-lines file of the run's events (zoomeval run)", "required": True}
    )


def record_of(record: logging.LogRecord) -> dict[str, Any] | None:
    """The JSON object of one of Snakemake's log records (``event``, ``time`` and the event's fields), or None for a
    record that is no event zoomeval reads."""
    event = str(getattr(record, "event", "") or "")
    if event not in FIELDS:
        return None
    found: dict[str, Any] = {"event": event, "time": record.created}
    found.update({name: getattr(record, name, None) for name in FIELDS[event]})
    if event == "error":
        found["message"] = record.getMessage()
    return found


class LogHandler(LogHandlerBase):
    """Appends each event to the settings' ``events`` file, one JSON object a line, flushed at once."""

    def __post_init__(self) -> None:
        self.stream = open(self.settings.events, "a", encoding="utf-8")  # type: ignore[union-attr]

    def emit(self, record: logging.LogRecord) -> None:
        if (found := record_of(record)) is not None:
            self.stream.write(json.dumps(found, default=str) + "\n")
            self.stream.flush()

    def close(self) -> None:
        self.stream.close()
        super().close()

    @property
    def writes_to_stream(self) -> bool:
        return False  # Snakemake keeps its own console output (zoomeval run's log file)

    @property
    def writes_to_file(self) -> bool:
        return False  # no log for people: Snakemake would list it among its logs

    @property
    def has_filter(self) -> bool:
        return True  # every event, whatever --quiet says

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
