"""``zoomeval.Study(DIR).predictions()`` against a raw read of the same file: a synthetic prediction file of N images
at the paper's 36 scales (324 transforms a image, random classes and confidences), then, each in a fresh process,
``pl.read_parquet`` of it and ``Study.predictions(...).collect()``; prints each side's CPU seconds (user + system)
and peak memory, and their ratios. Run ``python bench/study_predictions_bench.py [N ...] [--folder DIR]`` (default
10,000 and 50,000 images, a temporary folder) from the checkout with ``PYTHONPATH=src:.``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from zoomeval.core.io import write_json
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid
from zoomeval.inference.tables import prediction_table, write_table

#: The paper's scales: 36 of them, 324 transforms.
SCALES = list(range(64, 64 + 32 * 36, 32))
#: Run in a fresh process: the read, then its CPU seconds and peak memory (resource's ru_maxrss, KiB on Linux).
PROBE = """
import resource, sys, polars as pl
from zoomeval import Study
before = resource.getrusage(resource.RUSAGE_SELF)
if sys.argv[1] == "raw":
    frame = pl.read_parquet(sys.argv[2] + "/results/predictions/syn/original/m.parquet")
else:
    frame = Study(sys.argv[2]).predictions("syn", "original", "m").collect()
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(frame.height, cpu, after.ru_maxrss / 1024)
"""


def build(folder: Path, n: int) -> None:
    """A study folder holding one synthetic prediction file of ``n`` images."""
    grid, rng = ZoomGrid(SCALES), np.random.default_rng(0)
    records = [Record(f"img_{i:06d}", f"{i}.jpg", [i % 1000], [], 500, 375) for i in range(n)]
    shape = (n, grid.n_transforms)
    pred = rng.integers(0, 1000, shape, dtype=np.int16)
    columns = {"pred": pred, "pred_full": pred, "conf": rng.random(shape, dtype=np.float32)}
    meta = {"kind": "predictions", "scales": SCALES, "model": {"name": "m"}, "device": "cpu"}
    write_table(folder / "results/predictions/syn/original/m.parquet", prediction_table(records, grid, columns), meta)
    write_json(folder / "results/study.json", {})


def measure(side: str, folder: Path) -> tuple[int, float, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, side, str(folder)], capture_output=True, text=True, check=True)
    rows, cpu, mib = out.stdout.split()
    return int(rows), float(cpu), float(mib)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("images", nargs="*", type=int, default=[10_000, 50_000])
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    root = args.folder or Path(tempfile.mkdtemp())
    for n in args.images:
        folder = root / f"syn{n}"
        build(folder, n)
        (rows, raw_cpu, raw_mib), (_, cpu, mib) = measure("raw", folder), measure("study", folder)
        print(
            json.dumps(
                {
                    "images": n,
                    "rows": rows,
                    "raw": {"cpu_s": round(raw_cpu, 2), "peak_mib": round(raw_mib)},
                    "predictions": {"cpu_s": round(cpu, 2), "peak_mib": round(mib)},
                    "cpu_ratio": round(cpu / raw_cpu, 2),
                    "memory_ratio": round(mib / raw_mib, 2),
                }
            )
        )


if __name__ == "__main__":
    main()
