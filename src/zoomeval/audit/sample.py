"""What an audit of a study's files is made of (:mod:`zoomeval.audit.study`): the auditor's settings, the seeded
sample of a file's rows, the tolerance between two runs, the images found by content and one file's result. Both the
study's audit and each file's (:mod:`zoomeval.audit.files`) build on it."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from zoomeval.core.checksums import sha256_file
from zoomeval.core.manifest import Record, read_manifest
from zoomeval.study.index import LAYOUT

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
    """The images of one dataset of a study, found by the sha256 its manifest records and read only inside the folders
    the audit trusts, ``roots`` (every symlink followed; a file out of them, or not a regular file, is never opened).

    With the auditor's ``--images`` folders, they are the roots and the only source: each image is a file there with
    its recorded sha256, and the study's own file is never used in its place (an image swapped in the study, its
    sha256 rewritten, has no such file there). Without them, the roots are the study's dataset folder and its
    ``resources/``: an image is the file the manifest names, if its sha256 is the record's, else a file with that
    sha256 in the study's images folder; a manifest naming a path out of the roots (``..``, an absolute path, a
    symlink out of the study) or a file that is not a regular file (a device, a FIFO) is refused before any image is
    read. The folders are hashed once, on the first image not found in place."""

    def __init__(self, directory: Path, dataset: str, auditor: Auditor) -> None:
        folder = real_path(directory / auditor.layout.path("dataset", dataset=dataset))
        manifest = directory / auditor.layout.path("manifest", dataset=dataset)
        if (path := within(manifest, [folder])) is None or not path.is_file():
            raise ValueError(f"{manifest}: not a regular file in the study's {folder}")
        self.records = {r.image_id: r for r in read_manifest(path)}
        if any(not r.sha256 for r in self.records.values()):
            raise ValueError(
                f"{manifest}: records no sha256 per image (manifest schema < 3), so images cannot be found "
                "by content; rebuild it (--forcerun dataset_manifest) and re-run the study"
            )
        self.roots = [real_path(p) for p in auditor.images] or [folder, real_path(directory / "resources")]
        self.folders = auditor.images or (directory / auditor.layout.path("images", dataset=dataset),)
        own = () if auditor.images else self.records.values()
        self.placed = {r.image_id: self._placed(directory / r.path, r, manifest) for r in own}
        self._index: dict[str, Path] | None = None

    def _placed(self, path: Path, record: Record, manifest: Path) -> Path | None:
        """The file a record names, every symlink followed (None: there is none), refused unless it lies in the roots
        and is a regular file."""
        found = within(path, self.roots)
        if found is None or (found.exists() and not found.is_file()):
            why = "leads out of the study" if found is None else "is not a regular file"
            raise ValueError(
                f"{manifest}: image {record.image_id} is {record.path!r}, which {why} (an audit reads the study's "
                f"images only as regular files in {' or '.join(map(str, self.roots))}); give your copy of the "
                "dataset with --images"
            )
        return found if found.exists() else None

    def find(self, record: Record) -> Path | None:
        own = self.placed.get(record.image_id)
        if own is not None and sha256_file(own) == record.sha256:
            return own
        if self._index is None:
            files = (p for folder in self.folders if folder.is_dir() for p in sorted(folder.rglob("*")))
            found = (within(p, self.roots) for p in files)
            self._index = {sha256_file(p): p for p in found if p is not None and p.is_file()}
        return self._index.get(record.sha256)


def real_path(path: Path) -> Path:
    """``path`` with every symlink followed (a symlink loop is left as it is, and is then no file)."""
    return Path(os.path.realpath(path))


def within(path: Path, roots: Sequence[Path]) -> Path | None:
    """``path`` with every symlink followed, if that lies in one of ``roots`` (themselves followed); else None."""
    found = real_path(path)
    return found if any(found.is_relative_to(root) for root in roots) else None


class Finders(dict[str, ImageFinder]):
    """An :class:`ImageFinder` per dataset of a study (each manifest read and checked once)."""

    def __init__(self, directory: Path, auditor: Auditor) -> None:
        super().__init__()
        self.directory, self.auditor = directory, auditor

    def __missing__(self, dataset: str) -> ImageFinder:
        self[dataset] = finder = ImageFinder(self.directory, dataset, self.auditor)
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

    def __post_init__(self) -> None:
        if self.seed is not None and not (isinstance(self.seed, int) and self.seed >= 0):  # numpy takes any such
            raise ValueError(f"--seed: {self.seed} is no seed; give a whole number S >= 0")

    def seeded(self) -> Auditor:
        """This auditor with its seed drawn fresh where none was given."""
        return self if self.seed is not None else replace(self, seed=secrets.randbits(32))
