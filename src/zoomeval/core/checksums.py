"""sha256 of large input files, remembered between runs while the file is unchanged.

Hashing a 184 GB archive takes minutes, so the digest is kept in a small JSON file (one per cache folder,
keyed by the file's resolved path) together with the file's device, inode, size, mtime and ctime. It is
reused only while all five are unchanged, the way git and rsync decide that a file has not changed: replacing
or rewriting a file changes its ctime, which users cannot set. A file changed less than
:data:`SETTLE_NS` before it was hashed is hashed again on the next run, in case a second write within the
same timestamp tick went unseen (git's "racily clean" rule).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from zoomeval.core.io import read_json, write_json

#: How long a file must have been left alone before its remembered digest is trusted (covers 1-2 s timestamps).
SETTLE_NS = 2_000_000_000
CACHE_NAME = ".sha256.json"


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def sha256(path: Path, cache_dir: Path) -> str:
    """The sha256 of ``path``, from ``cache_dir/.sha256.json`` when the file is unchanged since it was hashed."""
    cache = cache_dir / CACHE_NAME
    key = str(path.resolve())
    try:
        entries = read_json(cache)
    except (OSError, ValueError):  # none yet, or unreadable: hash again
        entries = {}
    before = path.stat()
    entry = entries.get(key) if isinstance(entries, dict) else None
    if isinstance(entry, dict) and entry.get("stat") == _identity(before):
        return str(entry["sha256"])
    started = time.time_ns()
    digest = sha256_file(path)
    settled = max(before.st_mtime_ns, before.st_ctime_ns) + SETTLE_NS < started
    if settled and _identity(path.stat()) == _identity(before):  # and not written to while being read
        entries = entries if isinstance(entries, dict) else {}
        entries[key] = {"stat": _identity(before), "sha256": digest}
        write_json(cache, entries)
    return digest
