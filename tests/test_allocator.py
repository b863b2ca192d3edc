"""The allocator setting: glibc keeps a freed 64 MiB buffer, so allocating it again faults no page in."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: Allocates and frees a 64 MiB buffer 8 times, then prints the minor page faults of 8 more rounds.
PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from zoomeval.core.allocator import keep_freed_memory
    assert keep_freed_memory()
def rounds():
    for _ in range(8):
        buffer = np.ones(64 << 20, dtype=np.uint8)
        del buffer
rounds()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def minor_faults(mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env = {k: v for k, v in env.items() if not k.startswith("MALLOC_")}  # the default must be glibc's own
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_buffers_stay_mapped() -> None:
    # 8 rounds of 64 MiB are 131,072 pages; glibc's default unmaps each buffer on free (with transparent huge
    # pages fewer faults, but thousands), tuned it reuses the heap and faults only for stray small objects.
    assert minor_faults("default") > 1000
    assert minor_faults("tuned") < 100


def test_no_op_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    from zoomeval.core import allocator

    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    assert allocator.keep_freed_memory() is False


@pytest.mark.parametrize("script", ["predict.py", "sam_masks.py", "tta.py"])
def test_model_jobs_keep_freed_memory(script: str) -> None:
    """Every job that runs a model sets the allocator up before anything else happens in its log context."""
    lines = (ROOT / "workflow" / "scripts" / script).read_text().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("with to_file(sm.log[0])"))
    assert lines[start + 1].strip().startswith("keep_freed_memory()")
