"""Reading a big study index: one tiny result (the leaderboard tests' study) copied to N models by hard links, each
with its own metrics file, sealed in one index of N entries; prints the seconds ``read_study`` and the whole
leaderboard (grouping and Markdown) take. Run ``python bench/study_index_bench.py [N] [FOLDER]`` (default 20,000,
a temporary folder) from the checkout with ``PYTHONPATH=src:.``."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.test_leaderboard import LAYOUT, study
from zoomeval.core.io import read_json, write_json
from zoomeval.publish.boards import merge
from zoomeval.publish.leaderboard import markdown
from zoomeval.study.verified import read_study


def build(folder: Path, n: int) -> None:
    """``n`` results of models ``m0``..: the first result's files linked under each model's name."""
    study(folder)
    index = read_json(folder / LAYOUT.path("study_index"))
    (entry,) = index["results"]
    metrics = read_json(folder / entry["path"])
    entries = []
    for k in range(n):
        model = f"m{k}"
        inputs = {}
        for role, item in metrics["inputs"].items():
            variant = {"variant": "original"} if role == "predictions" else {}
            wildcards = {"dataset": "demo", "model": model, **variant}
            path = LAYOUT.path(role, **wildcards)
            if not (folder / path).exists():
                os.link(folder / item["path"], folder / path)
            inputs[role] = {**item, "path": path}
        path = LAYOUT.path("metrics", scored="demo", variant="original", model=model)
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({**metrics, "model": model, "inputs": inputs})
        (folder / path).write_text(text)
        entries.append({**entry, "path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()})
    write_json(folder / LAYOUT.path("study_index"), {**index, "results": entries})


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    folder = Path(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()) / "study"
    build(folder, n)
    start = time.perf_counter()
    results, problems = read_study(folder, LAYOUT)
    read = time.perf_counter() - start
    board, _ = merge([folder])
    markdown(board)
    total = time.perf_counter() - start
    size = (folder / LAYOUT.path("study_index")).stat().st_size
    print(
        f"{n} entries ({size / 1e6:.1f} MB index): read_study {read:.1f} s ({len(results)} verified, "
        f"{len(problems)} refused), with the leaderboard's grouping and Markdown {total:.1f} s"
    )


if __name__ == "__main__":
    main()
