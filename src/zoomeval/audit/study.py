"""``zoomeval audit DIR``: a seeded random sample of the rows of every prediction and standard-evaluation file of a
sealed study, recomputed here and compared with what the files store.

A study's seal and ``leaderboard --verify`` check that its files are the ones its index names and that its metrics
follow from its predictions; both must believe the predictions. An audit does not: for each file it draws ``sample``
rows (a seeded draw without replacement, :func:`sample_rows`), finds each row's image by the sha256 its manifest
records (:class:`ImageFinder`: in the auditor's ``images`` folders where given, else among the study's own files,
never read outside them) and the model by its recorded entry, checked against the weights' recorded sha256, and
recomputes the row's logits through the code that wrote it (:mod:`zoomeval.inference.recompute`). What it takes from
the study unchecked (the labels above all) is listed in its report (:data:`NOT_CHECKED`). A row agrees when its stored
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

The sample, the tolerance, the image finders and the auditor's settings are :mod:`zoomeval.audit.sample`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from zoomeval import __version__
from zoomeval.audit.files import audit_file
from zoomeval.audit.sample import Audited, Auditor, Finders, detection_bound
from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import write_json
from zoomeval.core.layout import declare
from zoomeval.study.index import LAYOUT
from zoomeval.study.verified import read_study

#: Version of audit.json's layout (2: ``not_checked``).
AUDIT_SCHEMA_VERSION = 2
declare("audit", schema_version=AUDIT_SCHEMA_VERSION)
#: What an audit takes from the study as it is (printed, and kept in the record): the labels are only tied to the
#: key by the seal, so a relabelled manifest, resealed, passes the audit as it passes the leaderboard.
NOT_CHECKED = (
    "the labels (each manifest's, taken as the study's: a relabelled manifest, resealed, is not caught)",
    "the masks (SAM's or the boxes') and an open_clip model's zero-shot head (the study's files, taken as they are)",
)
#: ... and, without ``--images``, its images.
OWN_IMAGES = (
    "the images (the study's own files, taken as the dataset's: an image swapped and its rows recomputed is not "
    "caught; give your copy of the dataset with --images)"
)
#: The fraction of altered rows the printed guarantee is stated for.
SHOWN_FRACTION = 0.01


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
    device = _device_type(auditor.device)  # a bad --device is refused before any file is read
    auditor = auditor.seeded()
    finders = Finders(directory, auditor)
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
        "device": device,
        "precision": auditor.precision,
        "images": [str(p) for p in auditor.images],
        "not_checked": [*NOT_CHECKED, *([] if auditor.images else [OWN_IMAGES])],
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
    lines += [f"not checked: {item}" for item in record["not_checked"]]
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
