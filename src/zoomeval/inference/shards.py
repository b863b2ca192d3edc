"""Where a predict or tta job keeps its results while it runs: shards of images, reused by a rerun, merged at the end.

The shards of ``<model>.parquet`` are pairs of files (predictions and aggregates; a tta job has predictions only)
in the hidden folder ``.<model>.parquet.shards/`` beside it, each written atomically, the predictions last: once a
shard's predictions file is there, the pair is complete. A shard is reused only when its identity (a hash of the
job's metadata, which holds the model, its weights hash and every setting that changes the numbers, and of the
shard's image ids and masks) matches, so a killed job loses at most the shard it was working on. A job holds a
lock on the folder, so a second job for the same output (a rerun racing one that was left running when Snakemake
was killed) refuses to start. The merged files replace the folder.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from zoomeval.core.io import read_metadata
from zoomeval.core.manifest import Record
from zoomeval.inference.tables import merge, write_table

log = logging.getLogger(__name__)
#: The shard folders whose lock this process holds.
_HELD: dict[Path, str] = {}


def shard_identity(metadata: dict[str, Any], image_ids: list[str], masks_digest: str | None) -> str:
    """What a shard's results depend on: the job's metadata, the shard's images and their masks."""
    return hashlib.sha256(json.dumps([metadata, image_ids, masks_digest], sort_keys=True).encode()).hexdigest()


class ShardStore:
    """The shards of one prediction file and its aggregates file (None: a job without aggregates)."""

    def __init__(self, predictions: Path, aggregates: Path | None = None) -> None:
        self.predictions, self.aggregates = predictions, aggregates
        self.folder = predictions.with_name(f".{predictions.name}.shards")

    def paths(self, index: int) -> tuple[Path, ...]:
        """Shard ``index``'s predictions file, then its aggregates file if the job has one."""
        name = f"{index:05d}"
        aggregates = (self.folder / f"{name}.aggregates.parquet",) if self.aggregates is not None else ()
        return self.folder / f"{name}.parquet", *aggregates

    def reusable(self, index: int, identity: str) -> bool:
        """Whether shard ``index`` is complete and was computed for ``identity``."""
        return all(p.exists() and read_metadata(p).get("identity") == identity for p in self.paths(index))

    def pending(
        self, records: Sequence[Record], size: int, metadata: dict[str, Any], masks_digest: str | None = None
    ) -> Iterator[tuple[int, Sequence[Record], str]]:
        """The shards of ``size`` images of ``records`` still to compute, as ``(index, images, identity)``; the
        complete shards of the same identity are reused."""
        for index, start in enumerate(range(0, len(records), size)):
            chunk = records[start : start + size]
            identity = shard_identity(metadata, [r.image_id for r in chunk], masks_digest)
            if self.reusable(index, identity):
                log.info("reusing %s", self.paths(index)[0])
                continue
            yield index, chunk, identity

    def write(self, index: int, identity: str, predictions: pa.Table, aggregates: pa.Table | None = None) -> None:
        predictions_path, *aggregates_path = self.paths(index)
        for path in aggregates_path:
            write_table(path, aggregates, {"kind": "shard", "identity": identity})
        write_table(predictions_path, predictions, {"kind": "shard", "identity": identity})  # the pair is complete

    def finish(self, count: int, metadata: dict[str, Any], aggregates_metadata: dict[str, Any] | None = None) -> None:
        """Merge shards ``0 .. count - 1`` into the final files, then remove the folder."""
        pairs = [self.paths(index) for index in range(count)]
        if self.aggregates is not None:
            write_table(self.aggregates, merge(a for _, a in pairs), aggregates_metadata or {})
        write_table(self.predictions, merge(p for p, *_ in pairs), metadata)
        shutil.rmtree(self.folder)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on the folder (created if needed); refuse if another process, or this one, holds
        it. The lock goes away with the process that holds it, even on ``kill -9``.

        A POSIX record lock (``lockf``), not ``flock``: processes forked while it is held (the DataLoader's
        workers) do not share it, so an orphaned worker that has not yet noticed its parent's death (up to 5 s)
        does not keep a rerun out. Such a lock does not exclude its own process, hence :data:`_HELD`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        key = self.folder.resolve()
        if key in _HELD:
            raise RuntimeError(self._busy(_HELD[key]))
        path = self.folder / "lock"
        with open(path, "a+") as fh:
            try:
                fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                fh.seek(0)
                raise RuntimeError(self._busy(fh.read().strip() or "a process")) from None
            if not path.exists() or os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino:
                raise RuntimeError(f"another job finished writing {self.folder} meanwhile; run again")
            _HELD[key] = f"pid {os.getpid()} on {socket.gethostname()}"
            fh.seek(0)
            fh.truncate()
            fh.write(_HELD[key])
            fh.flush()
            try:
                yield
            finally:
                del _HELD[key]

    def _busy(self, holder: str) -> str:
        return (
            f"{holder} is still writing {self.folder}: another job for the same output, probably left "
            "running when Snakemake was killed. Let it finish or end it (kill the pid; under SLURM, scancel its "
            "job), then run again"
        )
