"""``zoomeval init``: write a study directory that uses the workflow as a Snakemake module
(:mod:`zoomeval.study.directory`), then print its next steps."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from zoomeval.core.provenance import workflow_root
from zoomeval.core.strict_yaml import load_config_file
from zoomeval.study import directory as study_dir


def add(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser("init", help="write a study directory that uses this workflow as a Snakemake module")
    init.add_argument("directory")
    init.add_argument(
        "--preset", default="quick", choices=list(study_dir.PRESETS), help="what the study runs (default: quick)"
    )
    init.add_argument("--workflow", help="a zoomeval checkout to use (default: the installed workflow)")
    init.set_defaults(run=execute)


def execute(args: argparse.Namespace) -> int:
    root, folder = Path(args.workflow) if args.workflow else workflow_root(), Path(args.directory)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; give a new directory for the study")
    written = study_dir.init_study(folder, args.preset, root)
    print(f"wrote {', '.join(map(str, written))}")
    print("next:")
    print(f"  cd {shlex.quote(args.directory)}")
    if todo := list(study_dir.placeholders(load_config_file(written[1]))):
        print("  edit config/config.yaml; these keys name files you provide:")
        print("\n".join(f"    {key}: {value}" for key, value in todo))
    print("\n".join(f"  {step}" for step in study_dir.run_steps(args.preset, root)))
    return 0
