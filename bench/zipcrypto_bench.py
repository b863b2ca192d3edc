"""Extraction throughput of a ZipCrypto-encrypted zip like ObjectNet's, pure Python against Info-ZIP unzip.

Run ``python bench/zipcrypto_bench.py [MB]`` from the repository root (default 64 MB); prints the figures and
the projected time for the published ~184 GB ``objectnet-1.0.zip``, and writes ``results/bench/zipcrypto.json``.
Rates are per core of CPU time (this process and unzip), which a busy machine does not skew; the wall-clock
rates are printed beside them.

The members are PNG-like: noisy gradients that deflate barely shrinks, as photographs in PNG. The zip is
written once stored and once deflated with the test suite's ZipCrypto writer (itself pure Python, so writing
takes about as long as the pure-Python extraction), and each is extracted through
:func:`zoomeval.datasets.archives.extract` with and without ``unzip`` on the PATH. The sha256 of the archive, which
zoomeval computes once per archive version to name the extraction, is timed too.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.zipcrypto
from tests.zipcrypto import write_encrypted_zip  # noqa: E402
from zoomeval.core.checksums import sha256_file  # noqa: E402
from zoomeval.datasets.archives import extract  # noqa: E402

PASSWORD = "objectnetisatestset"
OBJECTNET_GB = 184
OUT = Path("results/bench/zipcrypto.json")


def png_like(rng: np.random.Generator, n_bytes: int) -> bytes:
    """Bytes of a noisy horizontal gradient, about as compressible as a photograph's PNG data."""
    ramp = np.resize(np.linspace(0, 200, 3000).astype(np.uint8), n_bytes)
    return (ramp + rng.integers(0, 40, n_bytes, dtype=np.uint8)).tobytes()


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (unzip): a rate per core that load does not skew."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(work, *args) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``work(*args)``."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    work(*args)
    return time.perf_counter() - wall, cpu_seconds() - cpu


def main(megabytes: int = 64) -> dict[str, float]:
    rng = np.random.default_rng(0)
    members = {"objectnet-1.0/": b""}
    for i in range(megabytes // 4):  # ObjectNet's PNGs average about 4 MB
        members[f"objectnet-1.0/images/class/{i}.png"] = png_like(rng, 4_000_000)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method, deflate in (("stored", False), ("deflated", True)):
            archive = write_encrypted_zip(Path(tmp) / f"{method}.zip", members, PASSWORD, deflate)
            size_mb = archive.stat().st_size / 1e6
            figures["sha256_mb_s"] = size_mb / timed(sha256_file, archive)[1]
            tools = {"python": None, "unzip": shutil.which("unzip")}
            for tool, found in tools.items():
                if tool == "unzip" and found is None:
                    print("unzip is not installed: its figures are left out")
                    continue
                target = Path(tmp) / f"{method}-{tool}"
                with mock.patch("shutil.which", return_value=found):
                    wall, cpu = timed(extract, archive, target, PASSWORD)
                figures[f"{tool}_{method}_mb_s"] = rate = size_mb / cpu
                figures[f"{tool}_{method}_wall_mb_s"] = size_mb / wall
                hours = OBJECTNET_GB * 1000 / rate / 3600
                print(
                    f"{tool:6s} {method:8s}: {size_mb:.0f} MB in {cpu:.1f} s of CPU = {rate:.2f} MB/s per core "
                    f"({size_mb / wall:.2f} MB/s wall clock) -> {OBJECTNET_GB} GB in {hours:.1f} h"
                )
                shutil.rmtree(target)
    print(
        f"sha256: {figures['sha256_mb_s']:.0f} MB/s -> {OBJECTNET_GB} GB in "
        f"{OBJECTNET_GB * 1000 / figures['sha256_mb_s'] / 60:.1f} min"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"megabytes": megabytes, **figures}, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
