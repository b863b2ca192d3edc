"""Where results come from: the workflow's files (Snakefile, rules, scripts, schema, presets, profiles) as this
installation finds them, and their git commit where they lie in a git checkout; recorded in every prediction file."""

from __future__ import annotations

import importlib.resources
import subprocess
from functools import cache
from pathlib import Path

#: The package whose data are the workflow's files (links to the repository's top level in a checkout).
WORKFLOW_PACKAGE = "zoomeval._workflow"
#: What an installation must hold for a study to run: each is named when it is missing.
WORKFLOW_FILES = ("Snakefile", "workflow/rules", "workflow/scripts", "workflow/schemas/config.schema.yaml", "config")


class MissingWorkflow(FileNotFoundError):
    """The installation lacks the workflow's files: a wheel built without its package data, or a checkout whose
    top-level files were moved."""


@cache
def workflow_root() -> Path:
    """The folder of the workflow's Snakefile: the repository's top level in an editable install (the package's
    links resolved), the package's own copy in an installed wheel. Refused, naming what is missing, when the
    installation lacks a file the workflow needs."""
    folder = Path(str(importlib.resources.files(WORKFLOW_PACKAGE)))
    if missing := [name for name in WORKFLOW_FILES if not (folder / name).exists()]:
        raise MissingWorkflow(
            f"this zoomeval installation lacks its workflow files ({', '.join(missing)} in {folder}); reinstall it "
            "from a wheel built with its package data or from a checkout (pip install -e .)"
        )
    return (folder / "Snakefile").resolve().parent


#: The metadata keys that say which workflow computed a result (:func:`source`), kept apart from what it depends on.
SOURCE_KEYS = ("zoomeval_commit", "zoomeval_workflow")


def source() -> dict[str, str | None]:
    """Where this process's workflow came from, as results record it: its git commit (None for an installed wheel)
    and its folder."""
    return dict(zip(SOURCE_KEYS, (workflow_commit(), str(workflow_root())), strict=True))


@cache
def workflow_commit(root: Path | None = None) -> str | None:
    """The git commit of ``root`` (default: :func:`workflow_root`), suffixed ``-dirty`` when tracked files differ
    from it; None outside a git checkout (an installed wheel) or without git."""
    root = root or workflow_root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"], capture_output=True)
    except OSError:  # no git
        return None
    return head.stdout.strip() + ("-dirty" if dirty.returncode == 1 else "")
