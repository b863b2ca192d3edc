"""The torch device a config names (``auto``, ``cpu``, ``cuda``, ``cuda:N``): checked without torch when the
config is read, where the machine tells how many GPUs there can be, and resolved with torch when a job starts.

``auto`` means CUDA where there is a GPU: when the workflow is parsed, a GPU the NVIDIA driver lists
(:func:`claims_gpu`, so that the job claims the ``gpu`` resource); when a job starts, one torch can use
(:func:`resolve_device`)."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from zoomeval.core.config import ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import torch

#: One entry per NVIDIA GPU the driver knows; absent without the NVIDIA driver (e.g. on a cluster's login node).
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
#: Where the jobs of one machine take turns at its GPUs (:func:`gpu_slot`).
GPU_LOCKS = Path(tempfile.gettempdir()) / f"zoomeval-gpus-{os.getuid()}"
#: The GPU lock files this process holds.
_HELD_GPUS: set[Path] = set()


def use_threads(threads: int) -> int:
    """Run torch on ``threads`` CPU threads (a job's: its Snakemake ``threads`` or ``inference.threads``; 0: the
    machine's cores, a lone command's), said in the job's log; returns the count."""
    import torch

    torch.set_num_threads(threads or os.cpu_count() or 1)
    log.info("torch threads: %d", torch.get_num_threads())
    return torch.get_num_threads()


def cuda_index(device: str) -> int | None:
    """The CUDA device index of a config's device string (``cuda`` is 0), or None for ``auto`` and ``cpu``."""
    if not device.startswith("cuda"):
        return None
    return int(device.partition(":")[2] or 0)


def gpus_at_most() -> int | None:
    """An upper bound on the CUDA devices this process can see, read without torch, or None if unknown.

    The driver's GPU list bounds it, and so does ``CUDA_VISIBLE_DEVICES``: CUDA numbers the devices it
    lists from 0 and stops at the first invalid entry."""
    bounds = []
    if NVIDIA_GPUS.is_dir():
        bounds.append(len(list(NVIDIA_GPUS.iterdir())))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        bounds.append(len([entry for entry in visible.split(",") if entry.strip()]))
    return min(bounds) if bounds else None


def claims_gpu(device: str) -> bool:
    """Whether a job on ``device`` uses a GPU, decided without torch: ``cuda`` and ``cuda:N`` do, and ``auto`` does
    where the NVIDIA driver lists a GPU this process may see."""
    if device == "auto":
        return bool(gpus_at_most())
    return cuda_index(device) is not None


def cpu_note(device: str, compile: bool) -> str | None:
    """The line a plan prints where ``compile`` is on but ``device`` (``auto``) finds no GPU here: the jobs will run
    on the CPU with compile off (:meth:`~zoomeval.core.config.InferenceSettings.for_device`)."""
    if compile and device == "auto" and not claims_gpu(device):
        return "inference.compile: no GPU is visible here, so the jobs run on the CPU with compile turned off"
    return None


def check_device(key: str, device: str) -> None:
    """Refuse a CUDA index that cannot exist on this machine; say nothing where the GPUs are unknown."""
    index, bound = cuda_index(device), gpus_at_most()
    if index is not None and bound is not None and index >= bound:
        raise ConfigError(f"{key}: {device!r} does not exist here, {_seen(bound)}; {_fix(bound)}")


def resolve_device(device: str, key: str) -> torch.device:
    """The torch device of a config's device string (``auto``: CUDA when available); a string that names no torch
    device, or a CUDA device that torch cannot see, is refused naming ``key``."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        named, index = torch.device(device), cuda_index(device)
    except (RuntimeError, ValueError):  # torch's refusal of a string that names no device
        raise ConfigError(f"{key}: {device!r} is no torch device (cpu, cuda, cuda:N, auto)") from None
    if index is not None and index >= (count := torch.cuda.device_count()):
        raise ConfigError(f"{key}: {device!r} is not available, {_seen(count)} to torch; {_fix(count)}")
    return named


@contextmanager
def gpu_slot(device: str, count: int, folder: Path = GPU_LOCKS) -> Iterator[str]:
    """The device a GPU job uses while the block runs: ``device`` itself, except that ``auto`` and ``cuda`` with
    ``count`` > 1 CUDA devices visible become the first ``cuda:K`` that no other job of this machine holds (a
    lock per device, gone with the process even on ``kill -9``). Snakemake's ``gpu`` resource bounds how many GPU
    jobs run at once; this spreads them over the GPUs. Devices are told apart by their ``CUDA_VISIBLE_DEVICES``
    entry, so jobs that see different GPUs as ``cuda:0`` (SLURM's) see one device each and take no lock."""
    if device not in ("auto", "cuda") or count < 2:
        yield device
        return
    visible = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    names = visible[:count] if len(visible) >= count else [str(k) for k in range(count)]
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for k, name in enumerate(names):
            path = folder / f"{name.replace('/', '_')}.lock"
            if path not in _HELD_GPUS and _try_lock(stack.enter_context(open(path, "a+")), path):
                _HELD_GPUS.add(path)
                stack.callback(_HELD_GPUS.discard, path)
                yield f"cuda:{k}"
                return
        raise RuntimeError(
            f"all {count} GPUs are held by other zoomeval jobs (locks in {folder}): run with --resources gpu=N, "
            f"N at most {count}, or give inference.device: cuda:K"
        )


def _try_lock(fh: IO[str], path: Path) -> bool:
    """Take an exclusive record lock on ``fh`` (not shared with forked DataLoader workers); False if taken."""
    try:
        fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _seen(count: int) -> str:
    return f"{count} CUDA device{'' if count == 1 else 's'} visible"


def _fix(count: int) -> str:
    indices = {0: "", 1: ", cuda:0"}.get(count, f", cuda:0 to cuda:{count - 1}")
    return f"use auto, cpu{indices}"
