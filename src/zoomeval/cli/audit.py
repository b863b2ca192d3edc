"""``zoomeval audit``: a seeded sample of a sealed study's rows recomputed and compared (:mod:`zoomeval.audit`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from zoomeval.cli.common import add_shared, add_study_command, limit
from zoomeval.core.cells import terminal_text


def add(commands: argparse._SubParsersAction) -> None:
    from zoomeval.audit.sample import DEFAULT_SAMPLE, LOGIT_ERROR

    audit = add_study_command(commands, "audit", execute)
    audit.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_SAMPLE,
        metavar="N",
        help=f"rows recomputed per file (default {DEFAULT_SAMPLE}; all of a smaller file)",
    )
    add_shared(audit, "--seed", "the sample's seed, a whole number >= 0 (default: drawn fresh, and printed)")
    add_shared(audit, "--images", "your copy of the dataset: images are found in it only, by content (repeatable)")
    add_shared(audit, "--resources", "where the weights are (default: the study's resources folder)")
    audit.add_argument(
        "--device", default="auto", help="the audit's device: cpu, cuda, cuda:N or auto (the default: CUDA if present)"
    )
    audit.add_argument(
        "--precision",
        default="fp32",
        choices=sorted({p for p, _ in LOGIT_ERROR}),
        help="the audit's precision (default fp32)",
    )
    add_shared(audit, "--limit", "audit the study's run limited to N images")


def execute(args: argparse.Namespace) -> int:
    """recompute a seeded sample of every file's rows of a sealed study here and compare them with what is stored;
    exit 1 on any mismatch"""
    from zoomeval.audit.sample import Audited, Auditor
    from zoomeval.audit.study import audit_study, report_lines, write_record
    from zoomeval.core.layout import run_layout

    if args.sample < 1:
        raise ValueError(f"--sample: {args.sample} is no number of rows; give N >= 1")
    auditor = Auditor(
        args.sample,
        args.seed,
        args.device,
        args.precision,
        tuple(args.images or ()),
        args.resources,
        run_layout(limit(args)),
    )
    record = audit_study(Path(args.directory), auditor)
    for line in report_lines(record):
        print(terminal_text(line))
    print(f"record kept for reference (not proof) in {write_record(Path(args.directory), record, auditor.layout)}")
    return 0 if all(Audited(**item).clean for item in record["files"]) else 1
