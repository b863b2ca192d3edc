"""The ``zoomeval`` command: ``init`` a study directory, ``list`` what the registries and the model libraries hold,
and merge studies into one ``leaderboard``. Each subcommand is a thin call into the package."""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from zoomeval import study
from zoomeval.registries import REGISTRIES

#: ``zoomeval list`` kinds that print a registry of the package.
REGISTRY_KINDS = ("adapters", "sources", "label-sets", "presets")


def first_paragraph(text: str) -> str:
    """A text's first paragraph, on one line."""
    return " ".join(text.strip().split("\n\n")[0].split())


def registry_rows(kind: str) -> list[tuple[str, str]]:
    """``(name, what it is)`` for every entry of one registry, in registration order."""
    if kind == "adapters":
        return [(a.name, f"inputs: {', '.join(a.required) or '-'}; boxes: {'yes' if a.boxes else 'no'}; "
                         f"{a.classes}") for a in REGISTRIES.adapters.values()]  # fmt: skip
    if kind == "sources":
        modules = {s.name: sys.modules[s.load.__module__] for s in REGISTRIES.sources.values()}
        return [(name, first_paragraph(inspect.getdoc(module) or "")) for name, module in modules.items()]
    if kind == "label-sets":
        return [(s.name, s.source) for s in REGISTRIES.label_sets.values()]
    if kind == "presets":
        return [(name, first_paragraph(study.preset_summary(name))) for name in study.PRESETS]
    raise ValueError(f"unknown kind {kind!r}; expected one of {[*REGISTRY_KINDS, 'models']}")


def _print_rows(rows: Iterable[tuple[str, ...]]) -> None:
    for row in rows:
        print("\t".join(row))


def _init(args: argparse.Namespace) -> int:
    root = Path(args.workflow) if args.workflow else study.CHECKOUT
    written = study.init_study(Path(args.directory), args.preset, root)
    print(f"wrote {', '.join(map(str, written))}")
    print(f"next: cd {args.directory} && snakemake --cores 8 all")
    return 0


def _list(args: argparse.Namespace) -> int:
    if args.kind == "models":
        from zoomeval.inference.catalogue import catalogue, matching

        if not args.source:
            raise ValueError("zoomeval list models needs a SOURCE (zoomeval list sources)")
        _print_rows(matching(catalogue(args.source), args.pattern or "*"))
        return 0
    if args.source:
        raise ValueError(f"zoomeval list {args.kind} takes no further argument")
    _print_rows(registry_rows(args.kind))
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from zoomeval.core.cells import terminal_text
    from zoomeval.report.leaderboard import write_leaderboard
    from zoomeval.report.timm_results import write_timm

    output = Path(args.output) if args.output else None
    directories = [Path(d) for d in args.directories]
    try:
        if args.format == "timm":
            text, apart = write_timm(directories, output, args.dataset, args.allow_stale, args.verify)
        else:
            text, apart = write_leaderboard(directories, output, args.allow_stale, args.verify)
    except ValueError as exc:  # its message names files, whose names may hold escape codes
        raise ValueError(terminal_text(str(exc))) from None
    for line in apart:
        print(terminal_text(f"zoomeval leaderboard: left apart: {line}"), file=sys.stderr)
    if not args.output:
        print(terminal_text(text))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="zoomeval", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="write a study directory that uses this workflow as a Snakemake module")
    init.add_argument("directory")
    init.add_argument("--preset", default="demo", choices=list(study.PRESETS))
    init.add_argument("--workflow", help="the zoomeval checkout to use (default: the one installed)")
    init.set_defaults(run=_init)
    listing = commands.add_parser("list", help="list adapters, sources, label sets, presets, or a source's models")
    listing.add_argument("kind", choices=[*REGISTRY_KINDS, "models"])
    listing.add_argument("source", nargs="?", help="models: the model source (timm, torchvision, open_clip)")
    listing.add_argument("pattern", nargs="?", help="models: a shell pattern over architecture.weights")
    listing.set_defaults(run=_list)
    board = commands.add_parser("leaderboard", help="merge the metrics.json of study directories into one table")
    board.add_argument("directories", nargs="+", metavar="DIR")
    board.add_argument("-o", "--output", help="FILE.csv, FILE.md or FILE.html (default: Markdown on stdout)")
    board.add_argument("--allow-stale", action="store_true",
                       help="list stale, missing, tampered or malformed results apart instead of refusing them")
    board.add_argument("--verify", action="store_true",
                       help="recompute every result from its predictions first and fail on any difference")
    board.add_argument("--format", choices=["leaderboard", "timm"], default="leaderboard",
                       help="timm: the standard evaluation in timm's results-CSV columns (one scored dataset)")
    board.add_argument("--dataset", help="--format timm: the scored dataset to write (e.g. imagenet_real)")
    board.set_defaults(run=_leaderboard)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"zoomeval {args.command}: {exc}", file=sys.stderr)
        return 2
