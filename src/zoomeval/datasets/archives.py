"""Safe, atomic, cached extraction of .tar, .tar.gz/.tgz and .zip archives, encrypted zips included.

Every member is checked before anything is written: an absolute path, a path or link that leads out of the
target (following the archive's own symlinks the way the filesystem will once they exist), or a device/fifo
refuses the whole archive. Extraction then goes into a temporary folder beside the target that is renamed
onto it, so the target either holds the complete archive or does not exist. Files and folders get the mode
that the process umask gives new ones; the modes stored in the archive are ignored, as zip extraction does.

Zips encrypted with the traditional PKWARE cipher ("ZipCrypto", as ObjectNet's) need a password. Python's
``zipfile`` decrypts them in pure Python at about 1.8 MB/s per core, so Info-ZIP ``unzip`` does it where
installed (about 60-70 MB/s; ``bench/zipcrypto_bench.py``), after the same member checks and followed by a
check that every member landed at its name with its size (``unzip`` verifies the CRCs itself).
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from zoomeval.core.io import atomic_path

#: Symlink hops allowed while resolving one path; more means a loop, which is refused.
_MAX_HOPS = 40
#: The kinds of file that :func:`check_complete` recognises by the ending of their name.
_KINDS = {
    "tar archive": (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"),
    "zip archive": (".zip",),
    "JSON document": (".json",),
}


#: Names of archives: a download is extracted when its name ends in one of these (a local file, by its content).
ARCHIVE_SUFFIXES = _KINDS["tar archive"] + _KINDS["zip archive"]


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the target or is not plain data; nothing was extracted."""


@dataclass(frozen=True)
class _Member:
    name: str
    kind: Literal["file", "dir", "symlink", "hardlink", "special"]
    #: A symlink's target (relative to its folder) or a hardlink's (relative to the archive root).
    link: str = ""


def is_archive(path: Path) -> bool:
    return tarfile.is_tarfile(path) or zipfile.is_zipfile(path)


def extract(archive: Path, target: Path, password: str | None = None, password_key: str = "password") -> Path:
    """Extract ``archive`` (tar, compressed or not, or zip; detected by content) into ``target``.

    An existing ``target`` is returned as is, as a cache between runs: name it after the archive's content.
    ``password`` opens encrypted zip members; ``password_key`` is the config key that sets it, for messages.
    Raises :class:`UnsafeArchiveError` naming the first offending member, having written nothing.
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
            encrypted = [info for info in zf.infolist() if info.flag_bits & 0x1]
            if encrypted:
                _open_encrypted(archive, zf, encrypted[0], password, password_key)
            _check(archive, (_zip_member(zf, info) for info in zf.infolist()))
            if encrypted and shutil.which("unzip"):
                _extract_atomically(target, lambda tmp: _unzip(archive, zf, tmp, password or ""))
            else:
                if encrypted:
                    print(f"{archive}: decrypting in pure Python (about 1.8 MB/s); install unzip for about 60 MB/s")
                _extract_atomically(target, zf.extractall)
    else:
        raise ValueError(f"{archive}: not a tar or zip archive")
    return target


def _data_with_umask_modes(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter, and no mode: tarfile then creates files and folders as ``open`` and ``mkdir``
    do, with the umask's mode (a tar made under umask 077 would otherwise stay unreadable to others)."""
    return tarfile.data_filter(member, dest).replace(mode=None, deep=False)


def check_complete(path: Path, name: str) -> None:
    """Raise ValueError unless ``path`` holds a complete file of the kind that ``name`` ends in (an archive whose
    every member header can be read, or a JSON document); other names are not checked.

    A server can answer an HTML error page with status 200, or close the connection early without saying
    how long the body is: neither is a complete archive.
    """
    lower = name.lower()
    kind = next((k for k, endings in _KINDS.items() if lower.endswith(endings)), None)
    try:
        if kind == "tar archive":
            with tarfile.open(path) as tar:
                tar.getmembers()  # walks every header; a cut file ends too early
        elif kind == "zip archive":
            zipfile.ZipFile(path).close()  # the central directory is at the very end
        elif kind == "JSON document":
            json.loads(path.read_bytes())
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise ValueError(f"not a complete {kind} ({type(exc).__name__}: {exc})") from exc


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


def _open_encrypted(archive: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, password: str | None, key: str) -> None:
    """Set ``password`` on ``zf`` and check it on ``info`` (zipfile checks the encryption header's check byte)."""
    if not password:
        raise ValueError(f"{archive}: its members are encrypted; set {key} to the archive's password")
    zf.setpassword(password.encode())
    try:
        zf.open(info).close()
    except RuntimeError as exc:  # zipfile's "Bad password for file"
        raise ValueError(f"{archive}: {key} is not the archive's password ({exc}); set the right one") from exc
    except NotImplementedError as exc:  # e.g. WinZip AES
        raise ValueError(f"{archive}: {exc}; decrypt it with the tool that made it and give the folder") from exc


def _unzip(archive: Path, zf: zipfile.ZipFile, tmp: Path, password: str) -> None:
    """Extract ``archive`` into ``tmp`` with Info-ZIP unzip, then check that every member is there in full."""
    # unzip expands wildcards in the archive's name, so it reads a plain-named link to it.
    link = tmp.with_name(tmp.name + ".zip")
    os.symlink(archive.resolve(), link)
    try:
        # -P puts the password on the command line, where `ps` shows it: fine for a published password.
        cmd = ["unzip", "-qq", "-P", password, str(link), "-d", str(tmp)]
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    finally:
        link.unlink()
    if done.returncode != 0:
        raise ValueError(f"{archive}: unzip failed (exit {done.returncode}): {done.stderr.strip() or done.stdout}")
    umask = os.umask(0)
    os.umask(umask)
    for info in zf.infolist():
        path = tmp / info.filename
        if stat.S_ISLNK(info.external_attr >> 16):
            ok = path.is_symlink()
        elif info.is_dir():
            ok = path.is_dir()
        else:
            ok = path.is_file() and path.stat().st_size == info.file_size
        if not ok:
            raise ValueError(f"{archive}: unzip did not extract member {info.filename!r} in full; extract it by hand")
        if not path.is_symlink():  # unzip restores the stored modes; give the umask's, as zipfile does
            os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def _extract_atomically(target: Path, extract_into: Callable[[Path], None]) -> None:
    """Run ``extract_into`` on a new folder beside ``target`` and rename that onto ``target`` if it succeeds."""
    with atomic_path(target, folder=True) as tmp:
        extract_into(tmp)
