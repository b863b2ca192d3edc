"""``zoomeval leaderboard``: study directories and bundles merged into one table (:mod:`zoomeval.publish.boards`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zoomeval.cli.common import add_shared, directory, limit, output
from zoomeval.core.cells import terminal_text
from zoomeval.core.layout import limited_root


def add(commands: argparse._SubParsersAction) -> None:
    from zoomeval.publish.leaderboard import RANK_BY

    board = commands.add_parser("leaderboard", help="merge the metrics.json of study directories into one table")
    board.add_argument("directories", nargs="+", metavar="DIR", type=directory)
    board.add_argument("-o", "--output", help="FILE.csv, FILE.md or FILE.html (default: Markdown on stdout)")
    board.add_argument(
        "--allow-stale",
        action="store_true",
        help="list stale, missing, tampered or malformed results apart instead of refusing them",
    )
    board.add_argument(
        "--verify",
        action="store_true",
        help="recompute every result from its predictions first and fail on any difference",
    )
    board.add_argument(
        "--format",
        choices=["leaderboard", "timm"],
        default="leaderboard",
        help="timm: the standard evaluation in timm's results-CSV columns (one scored dataset)",
    )
    board.add_argument("--dataset", help="--format timm: the scored dataset to write (e.g. imagenet_real)")
    board.add_argument(
        "--rank-by",
        choices=RANK_BY,
        default=RANK_BY[0],
        help=f"the accuracy that ranks each protocol's models, best first (default {RANK_BY[0]})",
    )
    add_shared(
        board, "--limit", f"read each study's run limited to N images (zoomeval run --limit N: {limited_root('N')})"
    )
    board.add_argument(
        "--audit",
        type=int,
        metavar="N",
        help="audit each study here first (N rows per file, zoomeval audit) and refuse a row that fails",
    )
    add_shared(board, "--seed", "--audit: the samples' seed (default: drawn fresh)")
    add_shared(board, "--images", "--audit: your copy of the dataset, where images are found by content")
    board.set_defaults(run=execute)


def execute(args: argparse.Namespace) -> int:
    from zoomeval.core.layout import run_layout
    from zoomeval.publish.boards import write_merged

    path = output(args)
    directories, layout = [Path(d) for d in args.directories], run_layout(limit(args))
    auditor = _auditor(args, layout)
    text, apart = write_merged(
        directories, path, args.format, args.dataset, args.allow_stale, args.verify, layout, auditor, args.rank_by
    )
    for line in apart:
        print(terminal_text(f"zoomeval leaderboard: left apart: {line}"), file=sys.stderr)
    if not args.output:
        print(terminal_text(text))
    return 0


def _auditor(args: argparse.Namespace, layout: object) -> object:
    """``--audit N``'s auditor (None without it)."""
    if args.audit is None:
        return None
    if args.audit < 1:
        raise ValueError(f"--audit: {args.audit} is no number of rows; give N >= 1")
    from zoomeval.audit.sample import Auditor

    return Auditor(args.audit, args.seed, images=tuple(args.images or ()), layout=layout)
