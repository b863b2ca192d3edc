"""Keep freed memory in the process instead of handing it back to the kernel at every batch.

glibc serves allocations above its mmap threshold (128 KiB, raised dynamically up to 32 MiB) with a fresh
``mmap`` and unmaps them on ``free``, and trims the heap top above 128 KiB. A model's activation buffers are
larger, so every batch maps them again and faults every page in: measured with the embedded model at batch 64,
8 batches cost 12.8 s of system time and 6.7 M minor page faults. Raising both thresholds with ``mallopt`` at
the start of a job that runs a model keeps those buffers in the heap, where the next batch reuses them. The
price is that the process keeps its peak heap until it exits, which a job process can afford.

Elsewhere (musl, macOS) this is a no-op.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

#: ``mallopt`` parameter numbers from glibc's ``malloc.h``.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Allocations up to 1 GiB come from the heap; up to 2 GiB - 1 of free heap top is kept (``mallopt`` takes an int).
THRESHOLDS = {M_MMAP_THRESHOLD: 1 << 30, M_TRIM_THRESHOLD: (1 << 31) - 1}


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process and the workers it forks afterwards.

    Returns whether glibc accepted both; ``False`` (and nothing changed) on other C libraries."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    accepted = all([mallopt(param, value) == 1 for param, value in THRESHOLDS.items()])
    if not accepted:
        log.warning("glibc refused a mallopt threshold: large buffers are mapped and unmapped at every batch")
    return accepted
