"""``zoomeval export``: a study's results as a bundle for other tools (:mod:`zoomeval.publish.bundle`); not ``zoomeval
policy save``, which writes one fitted zoom policy."""

from __future__ import annotations

import argparse
from pathlib import Path

from zoomeval.cli.common import add_shared, add_study_command, limit


def add(commands: argparse._SubParsersAction) -> None:
    export = add_study_command(commands, "export", execute)
    export.add_argument(
        "--format",
        required=True,
        choices=["hf", "timm", "eee"],
        help="hf: .eval_results YAML per model repo; timm: results CSVs; eee: Every Eval Ever records",
    )
    export.add_argument("-o", "--output", help="the bundle folder to create (default: <study>-<format>)")
    export.add_argument("--date", help="the results' date, YYYY-MM-DD (default: today)")
    export.add_argument("--source-url", help="hf: where the results can be inspected (the entries' source)")
    add_shared(export, "--limit", "export the study's run limited to N images")


def execute(args: argparse.Namespace) -> int:
    """write a study's verified results in the formats other tools read, as a bundle that zoomeval leaderboard reads
    back"""
    from zoomeval.core.layout import run_layout
    from zoomeval.publish.bundle import write_bundle

    out = Path(args.output or f"{Path(args.directory).resolve().name}-{args.format}")
    options = {"date": args.date, "source_url": args.source_url}
    print(f"wrote {write_bundle(Path(args.directory), out, args.format, options, run_layout(limit(args))).parent}")
    return 0
