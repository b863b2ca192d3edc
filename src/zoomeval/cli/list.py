"""``zoomeval list``: what the package's registries hold, or a model library's models."""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Iterable

from zoomeval.cli.common import first_paragraph
from zoomeval.registries import REGISTRIES
from zoomeval.study import directory as study_dir

#: ``zoomeval list`` kinds that print a registry of the package.
REGISTRY_KINDS = ("adapters", "sources", "label-sets", "presets")


def add(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("list", help="list adapters, sources, label sets, presets, or a source's models")
    listing.add_argument("kind", choices=[*REGISTRY_KINDS, "models"])
    listing.add_argument(
        "source", nargs="?", help="models: the model source (timm, torchvision, open_clip, entry_point)"
    )
    listing.add_argument("pattern", nargs="?", help="models: a shell pattern over architecture.weights")
    listing.set_defaults(run=execute)


def execute(args: argparse.Namespace) -> int:
    if args.kind == "models":
        from zoomeval.inference.catalogue import catalogue, matching, unusable

        if not args.source:
            raise ValueError("zoomeval list models needs a SOURCE (zoomeval list sources)")
        cat = catalogue(args.source)
        if not (pairs := matching(cat, args.pattern or "*")):
            raise ValueError(
                f"no {args.source} model matches {args.pattern!r} (a shell pattern over "
                "architecture.weights, e.g. 'resnet50*')"
            )
        # a model that cannot be evaluated gets a third column saying why
        _print_rows((a, t, *[f"not evaluable: {why}" for why in [unusable(cat, a, t)] if why]) for a, t in pairs)
        return 0
    if args.source:
        raise ValueError(f"zoomeval list {args.kind} takes no further argument")
    _print_rows(registry_rows(args.kind))
    return 0


def registry_rows(kind: str) -> list[tuple[str, str]]:
    """``(name, what it is)`` for every entry of one registry, in registration order."""
    if kind == "adapters":
        return [
            (a.name, f"inputs: {', '.join(a.required) or '-'}; boxes: {'yes' if a.boxes else 'no'}; {a.classes}")
            for a in REGISTRIES.adapters.values()
        ]
    if kind == "sources":
        modules = {s.name: sys.modules[s.load.__module__] for s in REGISTRIES.sources.values()}
        docs = {name: first_paragraph(inspect.getdoc(module) or "") for name, module in modules.items()}
        return [(name, text.removeprefix(f"{name}: ")) for name, text in docs.items()]
    if kind == "label-sets":
        sets = REGISTRIES.label_sets.values()
        return [(s.name, first_paragraph(inspect.getdoc(s.relabel) or s.source)) for s in sets]
    if kind == "presets":
        return [(name, study_dir.preset_summary(name)) for name in study_dir.PRESETS]
    raise ValueError(f"unknown kind {kind!r}; expected one of {[*REGISTRY_KINDS, 'models']}")


def _print_rows(rows: Iterable[tuple[str, ...]]) -> None:
    for row in rows:
        print("\t".join(row))
