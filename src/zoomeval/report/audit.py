"""``zoomeval audit DIR``: a seeded random sample of the rows of every prediction and standard-evaluation file of a
sealed study, recomputed here and compared with what the files store.

A study's seal and ``leaderboard --verify`` check that its files are the ones its index names and that its metrics
follow from its predictions; both must believe the predictions. An audit does not: for each file it draws ``sample``
rows (a seeded draw without replacement, :func:`sample_rows`), finds each row's image by the sha256 its manifest
records (:class:`ImageFinder`: the file the manifest names, else the study's own dataset folders or the auditor's
``images`` folders) and the model by its recorded entry, checked against the weights' recorded sha256, and recomputes
the row's logits through the code that wrote it (:mod:`zoomeval.inference.recompute`). A row agrees when its stored
top-1 (over the class set, and over all classes) is the recomputed one and its stored confidence is within the
tolerance of the recomputed probability of its class (:func:`row_problems`, with ``top5`` checked where stored).

The tolerance (:func:`tolerance`) bounds what two honest runs in different precisions or on different devices can
differ by, in log-probability: each run's logits lie within :data:`LOGIT_ERROR` of exact arithmetic, so the log-
probability gap between two classes differs by at most twice the sum of the two runs' errors. A stored top-1 that is
not the recomputed one but within the tolerance of it is a tie, not a mismatch: the two runs cannot tell those
classes apart. The margin is the recomputed one (the stored files hold no second probability, and a stored margin
would be the file's own word).

What the sample proves (:func:`detection_bound`): had at least a fraction p of a file's rows been altered beyond the
tolerance, a uniform sample of N of its rows would contain one with probability at least 1 - (1 - p)^N (drawn
without replacement, the chance is larger still). The seed must not be known to whoever wrote the study: without
``--seed`` it is drawn fresh and printed. The record (``audit.json`` beside the study) is for reference; no command
takes it as proof, each audit recomputes.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from zoomeval import __version__
from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import write_json
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record
from zoomeval.report.study_index import LAYOUT
from zoomeval.report.verified import read_study

#: Version of audit.json's layout.
AUDIT_SCHEMA_VERSION = 1
declare("audit", schema_version=AUDIT_SCHEMA_VERSION)
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
#: The fraction of altered rows the printed guarantee is stated for.
SHOWN_FRACTION = 0.01


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


def study_files(directory: Path, layout: Any = LAYOUT) -> Iterator[tuple[str, str, Path]]:
    """``(kind, model, path)`` of every prediction and standard-evaluation file the study's verified results read
    (refused, naming the first problem, unless every result verifies)."""
    results, problems = read_study(directory, layout)
    if problems:
        raise ValueError(f"{problems[0]} (an audit needs a sealed study whose files verify)")
    seen: set[Path] = set()
    for result in results:
        for kind in ("predictions", "standard"):
            path = result.inputs.get(kind)
            if path is not None and path not in seen:
                seen.add(path)
                yield kind, result.metrics.model, path


def audit_study(directory: Path, auditor: Auditor) -> dict[str, Any]:
    """Audit every file of a study (see the module's docstring); returns the audit's record (``audit.json``)."""
    from zoomeval.report.audit_files import audit_file

    auditor, finders = auditor.seeded(), Finders(directory, auditor)
    audited = [
        audit_file(directory, kind, model, path, auditor, finders)
        for kind, model, path in study_files(directory, auditor.layout)
    ]
    index = directory / auditor.layout.path("study_index")
    return {
        "kind": "audit",
        "schema_version": AUDIT_SCHEMA_VERSION,
        "zoomeval": __version__,
        "study": str(directory),
        "seal_sha256": sha256_file(index),
        "sample": auditor.sample,
        "seed": auditor.seed,
        "device": _device_type(auditor.device),
        "precision": auditor.precision,
        "images": [str(p) for p in auditor.images],
        "files": [asdict(a) for a in audited],
    }


def _device_type(device: str) -> str:
    from zoomeval.core.devices import resolve_device

    return resolve_device(device, "--device").type


def write_record(directory: Path, record: dict[str, Any], layout: Any = LAYOUT) -> Path:
    """Keep the audit's record beside the study (for reference: nothing reads it as proof)."""
    path = directory / layout.path("audit")
    write_json(path, record)
    return path


def report_lines(record: dict[str, Any]) -> list[str]:
    """The audit in words: per file the rows checked, mismatches (each listed), ties and what the sample proves."""
    lines = [
        f"audit of {record['study']}: seed {record['seed']}, {record['sample']} rows per file, on "
        f"{record['device']} at {record['precision']}"
    ]
    for item in record["files"]:
        head = f"{item['model']}: {item['path']}"
        if item["refused"]:
            lines.append(f"{head}: NOT AUDITED: {item['refused']}")
            continue
        lines.append(
            f"{head}: {item['checked']} of {item['rows']} rows checked, {len(item['mismatches'])} "
            f"mismatches, {item['ties']} ties (tolerance {item['tolerance']:.3g} in log-probability)"
        )
        lines += [f"  MISMATCH {m}" for m in item["mismatches"]]
        lines.append(f"  {guarantee(item['checked'], item['rows'])}")
    failed = sum(not Audited(**f).clean for f in record["files"])
    lines.append(
        f"{failed} of {len(record['files'])} files failed the audit"
        if failed
        else f"all {len(record['files'])} files audited clean"
    )
    return lines


def guarantee(checked: int, rows: int, p: float = SHOWN_FRACTION) -> str:
    """What a clean sample of ``checked`` of ``rows`` rows proves, in words and numbers."""
    if checked >= rows:
        return f"every one of the {rows} rows was recomputed: no row differs beyond the tolerance"
    at_95 = 1 - 0.05 ** (1 / checked) if checked else 1.0
    return (
        f"had at least p = {p:g} of the {rows} rows been altered beyond the tolerance, an audit of N = {checked} "
        f"rows would have found one with probability >= 1 - (1 - p)^N = {detection_bound(p, checked):.6f} "
        f"(>= 0.95 from p = {at_95:.3g})"
    )


def audited_rows(
    directory: Path, rows: Sequence[dict[str, Any]], auditor: Auditor
) -> tuple[list[dict[str, Any]], list[str]]:
    """``zoomeval leaderboard --audit N``: the study audited here (never read from a record), each leaderboard row
    given the rows checked and mismatches of the files it was computed from; the rows whose files fail are left
    apart, each with a line naming the file and its first mismatch."""
    record = audit_study(directory, auditor)
    by_path = {item["path"]: Audited(**item) for item in record["files"]}
    kept, failed = [], []
    for row in rows:
        files = [by_path[p.relative_to(directory).as_posix()] for p in row["source"][1].inputs.values()]
        row["audit_rows"] = sum(f.checked for f in files)
        row["audit_mismatches"] = sum(len(f.mismatches) for f in files)
        if bad := [f for f in files if not f.clean]:
            first = bad[0].refused or f"{len(bad[0].mismatches)} mismatches, the first: {bad[0].mismatches[0]}"
            failed.append(f"{directory / bad[0].path}: failed the audit (seed {record['seed']}): {first}")
        else:
            kept.append(row)
    return kept, failed
