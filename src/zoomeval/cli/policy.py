"""``zoomeval policy save``: one fitted label-free zoom policy of a study as a file (:mod:`zoomeval.policy.fitted`),
for zoomeval.ZoomTTA and ``zoomeval predict``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from zoomeval.cli.common import add_shared, add_study_command, limit, output
from zoomeval.core.cells import terminal_text
from zoomeval.core.strict_yaml import load_config_file


def add(commands: argparse._SubParsersAction) -> None:
    policy = commands.add_parser("policy", help="take a study's fitted label-free zoom policy away as a file")
    actions = policy.add_subparsers(dest="action", required=True)
    save = add_study_command(actions, "save", execute)
    save.add_argument("--policy", required=True, choices=["cascade", "max_conf", "vote", "selector"])
    save.add_argument("--budget", required=True, type=int, metavar="K", help="forward passes (views) per image")
    save.add_argument("--fit", required=True, metavar="DATASET", help="the scored dataset to fit it on (all images)")
    save.add_argument("--model", metavar="NAME", help="the study's model (default: its only one)")
    save.add_argument("--variant", default="original", help="the image variant (default: original)")
    add_shared(save, "--limit", "the study's run limited to N images")
    save.add_argument(
        "--fold",
        type=int,
        metavar="K",
        help="cross-validation fold K's own policy, fitted on the other folds' images (default: fitted on every image)",
    )
    save.add_argument(
        "-o", "--output", metavar="FILE", help="default: <policy>-<budget>.<model>.<DATASET>[.fold<K>].json"
    )


def respelled(argv: Sequence[str]) -> list[str]:
    """``argv`` with the old spelling ``policy export`` as ``policy save``, said in one line on stderr; the rename
    keeps it apart from ``zoomeval export``, which writes a study's results for other tools."""
    if list(argv[:2]) != ["policy", "export"]:
        return list(argv)
    print("zoomeval policy export is now zoomeval policy save; running that", file=sys.stderr)
    return ["policy", "save", *argv[2:]]


def execute(args: argparse.Namespace) -> int:
    """write one fitted policy (views, rule, model, held-out accuracy) as a versioned JSON file that zoomeval.ZoomTTA
    applies"""
    from zoomeval.core.io import write_json
    from zoomeval.core.layout import run_layout
    from zoomeval.policy.fitted import export_policy, study_model

    layout, folder, path = run_layout(limit(args)), Path(args.directory), output(args)
    model = args.model or study_model(folder, layout, args.fit, args.variant)
    document = export_policy(
        folder, layout, args.fit, args.variant, model, args.policy, args.budget, study_settings(folder), args.fold
    )
    fold = "" if args.fold is None else f".fold{args.fold}"
    path = path or f"{args.policy}-{args.budget}.{model}.{args.fit}{fold}.json"
    write_json(path, document)
    held = document["held_out"]
    shown = f"held out ({held['protocol']}): {held['acc']:.2f} % in {held['passes']:.2f} passes" if held else ""
    whose = "" if args.fold is None else f"fold {args.fold}'s "  # its row is every fold's
    print(terminal_text(f"{path}: {whose}{args.policy}, {len(document['views'])} views; {shown}"))
    return 0


def study_settings(directory: Path) -> object:
    """The ``policies`` settings of the study in ``directory`` (its ``config/config.yaml``, else ``config.yaml``)."""
    from zoomeval.registries import load_config

    path = next((p for p in (directory / "config" / "config.yaml", directory / "config.yaml") if p.is_file()), None)
    if path is None:
        raise ValueError(f"{directory}: no config/config.yaml nor config.yaml: the study's policy settings are unknown")
    return load_config(load_config_file(path), check_paths=False).policies
