"""Safe, atomic, cached extraction of .tar, .tar.gz/.tgz and .zip archives.

Every member is checked before anything is written: an absolute path, a path or link that leads out of the
target (following the archive's own symlinks the way the filesystem will once they exist), or a device/fifo
refuses the whole archive. Extraction then goes into a temporary folder beside the target that is renamed
onto it, so the target either holds the complete archive or does not exist. Files and folders get the mode
that the process umask gives new ones; the modes stored in the archive are ignored, as zip extraction does.
"""

from __future__ import annotations

import os
import posixpath
import secrets
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: Symlink hops allowed while resolving one path; more means a loop, which is refused.
_MAX_HOPS = 40


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the target or is not plain data; nothing was extracted."""


@dataclass(frozen=True)
class _Member:
    name: str
    kind: Literal["file", "dir", "symlink", "hardlink", "special"]
    #: A symlink's target (relative to its folder) or a hardlink's (relative to the archive root).
    link: str = ""


def extract(archive: Path, target: Path) -> Path:
    """Extract ``archive`` (tar, compressed or not, or zip; detected by content) into ``target``.

    An existing ``target`` is returned as is, as a cache between runs. Raises :class:`UnsafeArchiveError`
    naming the first offending member, having written nothing.
    """
    archive, target = Path(archive), Path(target)
    if target.exists():
        return target
    if tarfile.is_tarfile(archive):  # tried first: a zip's signature can turn up inside a tar
        with tarfile.open(archive) as tar:
            _check(archive, map(_tar_member, tar.getmembers()))
            _extract_atomically(target, lambda tmp: tar.extractall(tmp, filter=_data_with_umask_modes))
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            _check(archive, (_zip_member(zf, info) for info in zf.infolist()))
            _extract_atomically(target, zf.extractall)
    else:
        raise ValueError(f"{archive}: not a tar or zip archive")
    return target


def _data_with_umask_modes(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter, and no mode: tarfile then creates files and folders as ``open`` and ``mkdir``
    do, with the umask's mode (a tar made under umask 077 would otherwise stay unreadable to others)."""
    return tarfile.data_filter(member, dest).replace(mode=None, deep=False)


def _tar_member(info: tarfile.TarInfo) -> _Member:
    if info.issym():
        return _Member(info.name, "symlink", info.linkname)
    if info.islnk():
        return _Member(info.name, "hardlink", info.linkname)
    if info.isdev():  # character/block devices and fifos
        return _Member(info.name, "special")
    return _Member(info.name, "dir" if info.isdir() else "file")


def _zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> _Member:
    # zip has no link type; Unix zippers store the mode in the high half of external_attr and the target as data.
    if stat.S_ISLNK(info.external_attr >> 16):
        return _Member(info.filename, "symlink", zf.read(info).decode())
    return _Member(info.filename, "dir" if info.is_dir() else "file")


def _check(archive: Path, members: Iterable[_Member]) -> None:
    """Raise :class:`UnsafeArchiveError` for the first member that is unsafe, in extraction order."""
    links: dict[str, str] = {}
    for member in members:
        problem = _problem(member, links)
        if problem:
            raise UnsafeArchiveError(f"{archive}: refusing to extract member {member.name!r}: {problem}")


def _problem(member: _Member, links: dict[str, str]) -> str | None:
    """Why ``member`` is unsafe, or None; records symlinks in ``links`` (resolved location -> target)."""
    if member.kind == "special":
        return "device or fifo"
    if member.name.startswith("/"):
        return "absolute path"
    if member.kind == "symlink":
        # The link itself is created at its folder's real location (replacing whatever is there) ...
        folder, _, last = member.name.rstrip("/").rpartition("/")
        parent = _resolve(folder, links)
        if parent is None or last in ("", ".", ".."):
            return "path leads outside the target"
        location = posixpath.join(parent, last)
        links[location] = member.link
        # ... and what it points to must stay inside, now and for every member written through it.
        return None if _resolve(location, links) is not None else f"symlink to {member.link!r} leads outside"
    if _resolve(member.name, links) is None:
        return "path leads outside the target"
    if member.kind == "hardlink" and _resolve(member.link, links) is None:
        return f"hardlink to {member.link!r} leads outside"
    return None


def _resolve(path: str, links: dict[str, str]) -> str | None:
    """Where ``path`` (relative to the target) lands once ``links`` exist, or None if it leaves the target.

    Resolving component by component, like the OS, matters: ``a/l/..`` is not ``a`` when ``a/l`` is a link.
    """
    if path.startswith("/"):
        return None
    resolved: list[str] = []
    pending = path.split("/")[::-1]  # a stack: the next component is last
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
            continue
        resolved.append(part)
        link = links.get("/".join(resolved))
        if link is None:
            continue
        hops += 1
        if hops > _MAX_HOPS or link.startswith("/"):
            return None
        resolved.pop()
        pending.extend(link.split("/")[::-1])
    return "/".join(resolved)


def _extract_atomically(target: Path, extract_into: Callable[[Path], None]) -> None:
    """Run ``extract_into`` on a new folder beside ``target`` and rename that onto ``target`` if it succeeds."""
    # Not tempfile.mkdtemp: its 0o700 would become the target's mode; mkdir honours the umask.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    try:
        extract_into(tmp)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # only left after a failure
