"""Where a job's start-up goes: the wall time a fresh interpreter takes to import what each workflow script imports
at its top (what every job of its rule pays before its first line of work), beside the interpreter alone and the
preamble Snakemake puts before every ``script:`` (its pickled job object and logger). With ``--events FILE`` (a
``zoomeval run`` events file, ``logs/zoomeval-run.*.events.jsonl``) also each job's wall time in that run, from
Snakemake's own start and end events.

Run ``python bench/job_startup.py [--repeat N] [--scripts table_a8 predict ...] [--events FILE]``; each figure is
the fastest of N runs (a loaded machine adds to every one of them). It prints one line per script: seconds, and
the heavy libraries those imports load.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"
#: What Snakemake's script preamble imports (snakemake.script.PythonScript.generate_preamble).
PREAMBLE = (
    "import pickle; from snakemake.logging import logger; from snakemake.iocontainers import Snakemake; "
    "import snakemake.io"
)
HEAVY = ("torch", "torchvision", "timm", "scipy", "polars", "matplotlib", "sklearn", "open_clip", "skimage")


def top_imports(script: Path) -> str:
    """The script's top-level import statements, as one line of Python."""
    tree = ast.parse(script.read_text())
    return "; ".join(ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom))


def timed(code: str, repeat: int) -> tuple[float, list[str]]:
    """The fastest wall time of ``python -c code`` over ``repeat`` runs, and the heavy libraries it loads."""
    best, loaded = float("inf"), []
    probe = f"{code}; import sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        best = min(best, time.perf_counter() - start)
        loaded = proc.stdout.split()
    return best, loaded


def job_walls(events: Path) -> list[tuple[str, str, float]]:
    """(rule, wildcards, seconds) of each finished job of a run's events file."""
    started, info, walls = {}, {}, []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "job_started":
            started.update(dict.fromkeys(event["jobs"], event["time"]))
        elif event["event"] == "job_info":
            info[event["jobid"]] = (event["rule_name"], "/".join(map(str, event["wildcards"].values())))
        elif event["event"] == "job_finished" and event["job_id"] in started:
            walls.append((*info.get(event["job_id"], ("?", "")), event["time"] - started[event["job_id"]]))
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scripts", nargs="*", help="script names (default: every workflow script)")
    parser.add_argument("--events", type=Path, help="a zoomeval run events file: each job's wall time too")
    args = parser.parse_args()
    bare, _ = timed("pass", args.repeat)
    preamble, loaded = timed(PREAMBLE, args.repeat)
    print(f"{'interpreter':24s} {bare:6.2f} s")
    print(f"{'snakemake preamble':24s} {preamble:6.2f} s  {' '.join(loaded)}")
    names = args.scripts or sorted(p.stem for p in SCRIPTS.glob("*.py"))
    for name in names:
        seconds, loaded = timed(f"{PREAMBLE}; {top_imports(SCRIPTS / f'{name}.py')}", args.repeat)
        print(f"{name:24s} {seconds:6.2f} s  {' '.join(loaded)}")
    if args.events:
        print("\njobs of the run (wall seconds, Snakemake's start to its end):")
        for rule, wildcards, seconds in job_walls(args.events):
            print(f"{rule:24s} {seconds:6.1f} s  {wildcards}")


if __name__ == "__main__":
    main()
