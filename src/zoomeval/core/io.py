"""Atomic writes and the versioned key-value metadata that every output carries.

Files are created with mode 0666 less the process umask, like any file the user creates: under umask 022 the
outputs are readable by colleagues, under 077 by the owner only.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval.core.cells import csv_cell

#: Key of the JSON document stored in each Parquet file's key-value metadata.
METADATA_KEY = b"zoomeval"


@contextmanager
def atomic_path(path: str | os.PathLike[str], folder: bool = False) -> Iterator[Path]:
    """Yield a new temporary file (a folder if ``folder``) beside ``path``; rename it onto ``path`` only if the block
    succeeds, else delete it.

    A killed or failing job therefore never leaves a partial file or folder under the final name. A folder is
    renamed only onto a path that does not exist.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{secrets.token_hex(8)}.tmp")
    # Not tempfile.mkstemp/mkdtemp: their modes 0600/0700 would survive the rename; these honour the umask.
    # O_EXCL and mkdir still never reuse an existing path.
    if folder:
        tmp.mkdir()
    else:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        (os.rename if folder else os.replace)(tmp, final)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.lexists(tmp):
            os.unlink(tmp)


def link_or_copy(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Make ``dest`` a hard link to ``source`` (no extra space) or, across file systems or where links are not
    allowed, an atomic copy of it."""
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, dest)
    except OSError:
        with atomic_path(dest) as tmp:
            shutil.copyfile(source, tmp)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The one CSV writer of every table: each cell made safe (:func:`zoomeval.core.cells.csv_cell`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in header])
    writer.writerows([csv_cell(c) for c in row] for row in rows)
    return buf.getvalue()


def write_csv(path: str | os.PathLike[str], header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    write_text(path, csv_text(header, rows))


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON document; a file that is not UTF-8 JSON, or nested deeper than Python's parser goes, is refused naming
    it."""
    try:
        return json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON document ({exc})") from exc
    except RecursionError:
        raise ValueError(
            f"{path}: nested deeper than any zoomeval document (a JSON parser's recursion limit); not one of its files"
        ) from None


def write_parquet(path: str | os.PathLike[str], table: pa.Table, metadata: dict[str, Any], **options: Any) -> None:
    """Write ``table`` with zstd (dictionary encoding unless ``options`` say otherwise) and ``metadata``
    as JSON under the ``zoomeval`` key."""
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **{"compression": "zstd", "use_dictionary": True, **options})


class NoMetadata(ValueError):
    """A Parquet file without the ``zoomeval`` metadata document (not written by :func:`write_parquet`)."""


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``zoomeval`` metadata document of a Parquet file written by :func:`write_parquet`; :class:`NoMetadata`,
    naming the file, where it has none."""
    meta = pq.read_schema(path).metadata or {}
    if METADATA_KEY not in meta:
        raise NoMetadata(f"{path}: no zoomeval metadata; expected a file written by zoomeval")
    return json.loads(meta[METADATA_KEY])
