"""``zoomeval run``: check a study, then build its targets with a progress display (:mod:`zoomeval.run`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zoomeval.cli.common import add_shared, limit
from zoomeval.core.layout import Layout, limited_root


def add(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="check a study, then build its tables and seal it, with a progress display")
    run.add_argument("directory", nargs="?", default=".", help="the study directory (default: the current one)")
    run.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="`study` (default: every table and the sealed study.json), `all` (also the figures, "
        "browser and hard sets) or a path of the results layout, e.g. "
        f"{Layout().path('table_tta', ext='csv')}",
    )
    add_shared(run, "--limit", f"the first N images of each dataset, in {limited_root('N')}")
    run.add_argument(
        "--cores", type=cores, metavar="N", help="cores for Snakemake, N >= 1 (default: all this process may use)"
    )
    run.add_argument(
        "--report",
        action="store_true",
        help=f"write Snakemake's report of the targets after the run ({Layout().path('report')})",
    )

    run.add_argument(
        "--set",
        action="append",
        default=[],
        type=setting,
        dest="settings",
        metavar="KEY=VALUE",
        help="this run only, set a config key (a dotted path: top_k, inference.batch_size) to a YAML value "
        "(3, cpu, [64,256], {key: value}); repeatable; checked like the config file, which is left unchanged, "
        "e.g. --set scales=[64,256] --set top_k=3",
    )
    run.set_defaults(run=execute)


def execute(args: argparse.Namespace) -> int:
    from zoomeval.run.launch import run_study

    return run_study(Path(args.directory), args.targets, limit(args), args.cores, args.report, args.settings)


def cores(text: str) -> int:
    """A number of cores, at least 1 (argparse type); otherwise the refusal names it."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is no number of cores; give N >= 1")
    return value


def setting(item: str) -> tuple[str, Any]:
    """A ``zoomeval run --set KEY=VALUE`` item (argparse type); otherwise the refusal names it."""
    from zoomeval.run.settings import parse_setting

    try:
        return parse_setting(item)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
