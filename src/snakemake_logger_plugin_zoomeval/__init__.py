"""Snakemake's entry to zoomeval's logger plugin (``--logger zoomeval``), found by its name's prefix: the handler and
its settings live in :mod:`zoomeval.run.logger_plugin`."""

from zoomeval.run.logger_plugin import LogHandler, LogHandlerSettings

__all__ = ["LogHandler", "LogHandlerSettings"]
