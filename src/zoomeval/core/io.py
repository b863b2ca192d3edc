"""Atomic writes and the versioned key-value metadata that every output carries.

Files are created with mode 0666 less the process umask, like any file the user creates: under umask 022 the
outputs are readable by colleagues, under 077 by the owner only. Every writer goes through :func:`atomic_path`,
which writes atomically but never replaces what is not a regular file (:func:`output_target`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zoomeval.core.cells import csv_cell

#: Key of the JSON document stored in each Parquet file's key-value metadata.
METADATA_KEY = b"zoomeval"


#: What an output path may name but is not written to, by file type.
_NOT_WRITTEN = {stat.S_IFDIR: "a directory", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Where a write to ``path`` goes, and whether it is written through (opened and written once) rather than
    renamed onto; refused (:class:`ValueError` naming ``path``) where nothing may be written.

    * nothing (a new file) or a regular file: renamed onto ``path``;
    * a character device or a FIFO (``/dev/stdout``, ``/dev/null``, a named pipe): written through;
    * a symlink: what it points at, by these rules; the link itself is never replaced (a regular file it points at
      is, from that file's folder). A symlink to nothing is refused, as GNU cp refuses it, and so is one to a file
      no path names (``/dev/stdout`` where stdout is a deleted file);
    * a directory, a block device or a socket: refused.
    """
    final = Path(path)
    try:
        mode = os.stat(final).st_mode  # follows a symlink: what it points at decides
    except FileNotFoundError:
        if final.is_symlink():
            raise ValueError(
                f"{final}: is a symlink to nothing ({os.readlink(final)}); zoomeval writes through a symlink only to "
                "what exists"
            ) from None
        return final, False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return final, True
    if not stat.S_ISREG(mode):
        what = _NOT_WRITTEN.get(stat.S_IFMT(mode), "not a regular file")
        raise ValueError(f"{final}: is {what}, not written over; name a file, a character device or a FIFO")
    if not final.is_symlink():
        return final, False
    resolved = Path(os.path.realpath(final))
    if resolved.exists() and os.path.samefile(resolved, final):
        return resolved, False
    raise ValueError(f"{final}: is a symlink to a file that no path names (/dev/stdout to a deleted file); name a file")


@contextmanager
def atomic_path(path: str | os.PathLike[str], folder: bool = False) -> Iterator[Path]:
    """Yield a new temporary file (a folder if ``folder``); put it where ``path`` says only if the block succeeds,
    else delete it.

    A file goes where :func:`output_target` says: renamed onto ``path`` (or onto the regular file a symlink there
    points at) from beside it, so a killed or failing job never leaves a partial file under the final name; or,
    complete, written through into the device or FIFO ``path`` names (then the temporary file is in the temporary
    folder, and a FIFO's write waits for a reader). A folder is renamed only onto a path where nothing is, not even
    a symlink.
    """
    final, through = (Path(path), False) if folder else output_target(path)
    if folder and os.path.lexists(final):
        raise ValueError(f"{final}: exists; a folder is written only where nothing is")
    if through:
        handle, name = tempfile.mkstemp(prefix=".zoomeval-")
        os.close(handle)
        tmp = Path(name)
    else:
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
        if through:  # no O_CREAT nor O_TRUNC: only into what is there
            with open(tmp, "rb") as data, open(os.open(final, os.O_WRONLY), "wb") as out:
                shutil.copyfileobj(data, out)
        else:
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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused where a key appears twice (which value a reader takes is then up to the reader)."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON document; a file that is not UTF-8 JSON (an object with a key twice, a number of more digits than
    Python reads), or nested deeper than Python's parser goes, is refused naming it."""
    try:
        return json.loads(Path(path).read_text(), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
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
