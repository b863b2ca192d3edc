"""Where results come from: the zoomeval checkout and its git commit, recorded in every prediction file."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

#: The checkout this package runs from (an editable install): the workflow's Snakefile, rules and configs are here.
CHECKOUT = Path(__file__).resolve().parents[3]


@cache
def workflow_commit(root: Path = CHECKOUT) -> str | None:
    """The git commit of ``root``, suffixed ``-dirty`` when tracked files differ from it; None outside a git
    checkout (an sdist, a wheel) or without git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"], capture_output=True)
    except OSError:  # no git
        return None
    return head.stdout.strip() + ("-dirty" if dirty.returncode == 1 else "")
