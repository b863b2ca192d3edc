"""One ``zoomeval run`` at a time in a study: the run holds an exclusive lock (``flock``) on a file of the study's
``.snakemake`` folder for as long as it lives, with its pid, host, start time and command written in it. A second
run is refused, naming that run, before it opens any other file of the study (the kernel drops the lock when the
holder ends, however it ends, so a killed run never leaves it behind)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from zoomeval.core.cells import terminal_text

#: The lock file, relative to the study directory.
LOCK = Path(".snakemake") / "zoomeval-run.lock"


class StudyBusy(ValueError):
    """Another ``zoomeval run`` holds the study."""


@contextlib.contextmanager
def holding(study: Path, command: str) -> Iterator[None]:
    """Hold ``study`` for this process while the block runs; refused (:class:`StudyBusy`) while another run holds
    it, and (:class:`ValueError`) where the lock's path is not a regular file: a symlink there is never followed."""
    path = study / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(mode := os.lstat(path).st_mode):
            what = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            raise ValueError(f"{path}: is {what}, not zoomeval run's lock; remove it and run again; nothing was run")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a symlink made since: ELOOP, not followed
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = terminal_text(os.read(fd, 4096).decode("utf-8", "replace").strip()) or "a run starting"
            raise StudyBusy(
                f"{study}: another zoomeval run holds this study ({holder}); wait for it to end, or "
                "stop it with Ctrl-C where it runs; nothing was run"
            ) from None
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {since}: {command}\n".encode())
        yield
    finally:
        os.close(fd)
