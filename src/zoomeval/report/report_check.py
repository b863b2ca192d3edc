"""``snakemake --report`` shows files its targets built, so it cannot run before them: this says which target to
build first, where Snakemake would stop at the first file with "<file> marked for report but does not exist"."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence

#: Missing files named in the message (all of them are counted).
SHOWN = 3


class ReportNotReady(ValueError):
    """A ``--report`` call whose targets are not built yet."""


def check_built(
    requested: Collection[str], builds: Mapping[str, Sequence[str]], exists: Callable[[str], bool] = os.path.exists
) -> None:
    """Refuse a report whose targets are not all built. ``requested``: the command's targets, rule names or files
    (none: ``all``); ``builds``: the files each rule target builds (a target that is no rule is a file)."""
    targets = list(requested) or ["all"]
    missing = [f for t in targets for f in builds.get(t, [t]) if not exists(f)]
    if not missing:
        return
    shown = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else "")
    command = " ".join(["snakemake", "--cores", "N", *targets])
    raise ReportNotReady(
        f"snakemake --report: {' '.join(targets)} is not built yet ({shown} missing). Build it first with the same "
        f"--configfile and --config, without --report: `{command}`; then run --report again, or add "
        "--report-after-run to build and report in one command"
    )
