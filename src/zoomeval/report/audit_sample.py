"""What an audit of a study's files is made of (:mod:`zoomeval.report.audit`): the auditor's settings, the seeded
sample of a file's rows, the tolerance between two runs, the images found by content and one file's result. Both the
study's audit and each file's (:mod:`zoomeval.report.audit_files`) build on it."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from zoomeval.core.checksums import sha256_file
from zoomeval.core.manifest import Record
from zoomeval.report.study_index import LAYOUT

#: Rows recomputed per file by default.
DEFAULT_SAMPLE = 1000
#: The largest error of one run's logits against exact arithmetic, by precision and device type (see
#: docs/how-to/audit.md for what each figure rests on: fp32 on a CPU and bf16 and fp16 on a CPU are measured there
#: with ``bench/audit_cost.py``; fp32 on CUDA, where cuDNN convolutions run in TF32 by default, is estimated as fp16).
LOGIT_ERROR = {
    ("fp32", "cpu"): 1e-3,
    ("fp32", "cuda"): 0.15,
    ("fp16", "cpu"): 0.15,
    ("fp16", "cuda"): 0.15,
    ("bf16", "cpu"): 1.0,
    ("bf16", "cuda"): 1.0,
}


def logit_error(precision: str, device: str) -> float:
    """:data:`LOGIT_ERROR` of a run at ``precision`` on ``device`` (``cuda:1``, or several joined by commas for a job
    run in parts: the largest); a device not in the table gets its precision's largest figure."""
    figures = [v for (p, _), v in LOGIT_ERROR.items() if p == precision]
    if not figures:
        raise ValueError(f"precision {precision!r}: not one of {sorted({p for p, _ in LOGIT_ERROR})}")
    return max(LOGIT_ERROR.get((precision, d.split(":")[0]), max(figures)) for d in device.split(","))


def tolerance(stored: tuple[str, str], audit: tuple[str, str]) -> float:
    """The log-probability tolerance between a file stored at ``(precision, device)`` and an audit run at another."""
    return 2 * (logit_error(*stored) + logit_error(*audit))


def detection_bound(p: float, n: int) -> float:
    """The least chance that ``n`` rows drawn uniformly include one of the altered rows, had at least a fraction
    ``p`` of them been altered: 1 - (1 - p)^n."""
    return 1 - (1 - p) ** n


def sample_rows(rows: int, n: int, seed: int, name: str) -> np.ndarray:
    """``min(n, rows)`` distinct row numbers of a file, sorted, drawn uniformly by ``seed`` and the file's ``name``
    (the same rows for the same seed and file, other rows for another file)."""
    salt = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return np.sort(np.random.default_rng([seed, salt]).choice(rows, size=min(n, rows), replace=False))


@dataclass
class Audited:
    """One file's audit: rows in the file and checked, each mismatch (row, image, transform, what differs), how many
    rows were ties, and why the file could not be audited at all (``refused``)."""

    path: str
    kind: str
    model: str
    rows: int = 0
    checked: int = 0
    tolerance: float = 0.0
    ties: int = 0
    mismatches: list[str] = field(default_factory=list)
    refused: str | None = None

    @property
    def clean(self) -> bool:
        return self.refused is None and not self.mismatches


class ImageFinder:
    """Images by content: the file a record names (a relative path: in the study directory ``root``) if its sha256
    is the record's, else any file with that sha256 in ``folders`` (hashed once, on the first image not found in
    place)."""

    def __init__(self, root: Path, folders: Sequence[Path]) -> None:
        self.root, self.folders, self._index = root, folders, None

    def find(self, record: Record) -> Path | None:
        own = self.root / record.path
        if record.sha256 and own.is_file() and sha256_file(own) == record.sha256:
            return own
        if self._index is None:
            files = (p for folder in self.folders if folder.is_dir() for p in sorted(folder.rglob("*")))
            self._index = {sha256_file(p): p for p in files if p.is_file()}
        return self._index.get(record.sha256) if record.sha256 else None


class Finders(dict[str, ImageFinder]):
    """An :class:`ImageFinder` per dataset of a study: its own images folder, then the auditor's folders."""

    def __init__(self, directory: Path, auditor: Auditor) -> None:
        super().__init__()
        self.directory, self.auditor = directory, auditor

    def __missing__(self, dataset: str) -> ImageFinder:
        own = self.directory / self.auditor.layout.path("images", dataset=dataset)
        self[dataset] = finder = ImageFinder(self.directory, [own, *self.auditor.images])
        return finder


@dataclass(frozen=True)
class Auditor:
    """How a study is audited: rows per file, the seed, the audit's device and precision, where images and weights
    are found (``resources``: the study's resources folder unless given) and the results layout."""

    sample: int = DEFAULT_SAMPLE
    seed: int | None = None
    device: str = "auto"
    precision: str = "fp32"
    images: tuple[Path, ...] = ()
    resources: Path | None = None
    layout: Any = LAYOUT
    threads: int = 0

    def seeded(self) -> Auditor:
        """This auditor with its seed drawn fresh where none was given."""
        return self if self.seed is not None else replace(self, seed=secrets.randbits(32))
