"""The study index (``results/study.json``), written last: every finished result of a study with its path, content
sha256 and comparability key. A study whose files no longer match its index is half-finished or was changed; the
leaderboard (:mod:`zoomeval.publish.leaderboard`) reads studies through their index only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoomeval import __version__
from zoomeval.analysis.metrics import read_metrics
from zoomeval.core.checksums import sha256_file
from zoomeval.core.documents import STRING, Document, Field, Form, check_fields, checked, fields_of
from zoomeval.core.io import write_json
from zoomeval.core.layout import Layout, declare, limit_of

#: The default results layout (a study's ``results`` folder).
LAYOUT = Layout()
#: study.json: the zoomeval that sealed it (absent from hand-made indexes) and the finished results, each checked on
#: reading by :func:`_entry`.
STUDY_INDEX = Document(
    "study index",
    1,
    (
        Field("zoomeval", STRING, required=False),
        Field("results", Form(lambda v: isinstance(v, list) and bool(v), "a non-empty list of finished results")),
    ),
    "re-run the study's workflow to rewrite it",
    kind="study_index",
)
declare("study_index", schema_version=STUDY_INDEX.version)
#: The largest index read (bytes): about 1 KB an entry, so room for a million results, which no study reaches.
MAX_INDEX_BYTES = 1 << 30


@dataclass(frozen=True)
class Entry:
    """One finished result: its metrics file (relative to the study directory, checked against the layout by
    :func:`_entry`), sha256 and comparability key."""

    path: str
    sha256: str = checked(Form(lambda d: isinstance(d, str) and len(d) == 64, "64 hexadecimal digits"))
    key: dict[str, Any] = checked(Form(lambda k: isinstance(k, dict), "the comparability key (an object)"))


def index_document(study: Path, metrics: Sequence[str]) -> dict[str, Any]:
    """study.json of the metrics files ``metrics`` (paths relative to the study directory ``study``), in the order
    given (the leaderboard lists a study's rows in it)."""
    results = []
    for path in metrics:
        key = read_metrics(study / path).key
        if key is None:
            raise ValueError(f"{path}: no comparability key (metrics schema_version < 5); re-run its analysis")
        results.append({"path": path, "sha256": sha256_file(study / path), "key": key})
    return STUDY_INDEX.document({"zoomeval": __version__, "results": results})


def write_index(path: str | os.PathLike[str], study: Path, metrics: Sequence[str]) -> None:
    """Seal the study: write its index ``path`` (atomically) of its metrics files."""
    write_json(path, index_document(study, metrics))


def read_index(study: Path, layout: Layout = LAYOUT) -> list[Entry]:
    """The entries of a study's index; refuses a missing or malformed one, naming the file, field and form."""
    path = study / layout.path("study_index")
    if not path.is_file():
        limit = limit_of(layout)
        command = shlex.join(["zoomeval", "run", str(study), *(["--limit", str(limit)] if limit else [])])
        raise ValueError(
            f"{path}: missing; the study is unfinished or older than study indexes: `{command}` "
            "builds its tables and seals it"
        )
    if path.stat().st_size > MAX_INDEX_BYTES:
        raise ValueError(
            f"{path}: {path.stat().st_size} bytes, more than the {MAX_INDEX_BYTES} an index of a million "
            "results would take; not a study index"
        )
    results = STUDY_INDEX.read(path)["results"]
    entries = [_entry(study, path, i, item, layout) for i, item in enumerate(results)]
    first: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if (j := first.setdefault(entry.path, i)) != i:
            raise ValueError(
                f"{path}: results[{i}] lists {entry.path} again (as results[{j}] does); an index lists each result once"
            )
    return entries


def inside(study: Path, name: str, where: str, layout: Layout) -> Path:
    """``study/name``, refused (naming ``where``, never reading the file) unless it lies in the study's results root
    once every symlink is followed: an entry with ``..`` or a symlink out of the study would read a file elsewhere."""
    root = (study / layout.root).resolve()
    if not (study / name).resolve().is_relative_to(root):
        raise ValueError(f"{where} is {name!r}, which leads out of the study's {root}; expected a file in it")
    return study / name


def _entry(study: Path, path: Path, i: int, item: Any, layout: Layout) -> Entry:
    where = f"{path}: results[{i}]"
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object with path, sha256 and key")
    name = item.get("path")
    if not isinstance(name, str) or layout.parse("metrics", name) is None or os.path.isabs(name):
        raise ValueError(f"{where}.path is {name!r}; expected a metrics file {layout.path('metrics')}")
    inside(study, name, f"{where}.path", layout)
    fields = fields_of(Entry)
    check_fields(item, fields, str(path), f"results[{i}].")
    return Entry(**{field.name: item[field.name] for field in fields})
