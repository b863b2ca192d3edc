import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from zoomeval.archives import UnsafeArchiveError, extract

TarEntry = tuple[tarfile.TarInfo, bytes | None]


def file(name: str, data: bytes = b"data") -> TarEntry:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, link: str = "") -> TarEntry:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    if kind == tarfile.DIRTYPE:
        info.mode = 0o755
    return info, None


def symlink(name: str, to: str) -> TarEntry:
    return special(name, tarfile.SYMTYPE, to)


def write_tar(path: Path, entries: list[TarEntry], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def write_zip(path: Path, entries: list[tuple[str, bytes]], symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name), data)  # ZipInfo keeps the name as is, unlike ZipFile.write
        for name, to in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # Unix, as zip -y stores links
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, to)
    return path


def snapshot(root: Path) -> dict[str, bytes | str | None]:
    """Every path under ``root`` with its content (files), link target (symlinks) or None (folders)."""
    found: dict[str, bytes | str | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            key = str(path.relative_to(root))
            found[key] = os.readlink(path) if path.is_symlink() else None if path.is_dir() else path.read_bytes()
    return found


@pytest.mark.parametrize("mode", ["w", "w:gz"])
def test_tar_extracts_nested_folders_and_inner_links(tmp_path: Path, mode: str) -> None:
    archive = write_tar(
        tmp_path / "archive.bin",  # detected by content, not by name
        [
            special("data", tarfile.DIRTYPE),
            file("data/a/b/c.txt", b"deep"),
            file("data/top.txt", b"top"),
            symlink("data/link", "a/b/c.txt"),
            file("data/a/../via-dotdot.txt", b"still inside"),
        ],
        mode,
    )
    target = tmp_path / "out" / "target"
    assert extract(archive, target) == target
    assert (target / "data/a/b/c.txt").read_bytes() == b"deep"
    assert (target / "data/top.txt").read_bytes() == b"top"
    assert os.readlink(target / "data/link") == "a/b/c.txt" and (target / "data/link").read_bytes() == b"deep"
    assert (target / "data/via-dotdot.txt").read_bytes() == b"still inside"
    assert sorted(os.listdir(target.parent)) == ["target"]  # no temporary folder left


def test_zip_extracts_nested_folders(tmp_path: Path) -> None:
    entries = [("data/", b""), ("data/a/b/c.txt", b"deep"), ("data/top.txt", b"top")]
    archive = write_zip(tmp_path / "archive.zip", entries)
    target = extract(archive, tmp_path / "target")
    assert (target / "data/a/b/c.txt").read_bytes() == b"deep"
    assert (target / "data/top.txt").read_bytes() == b"top"


def test_an_existing_target_is_reused(tmp_path: Path) -> None:
    archive = write_tar(tmp_path / "archive.tgz", [file("x.txt", b"x")])
    target = extract(archive, tmp_path / "target")
    archive.unlink()  # a second call must not even open it
    assert extract(archive, target) == target and (target / "x.txt").read_bytes() == b"x"


def test_other_files_are_not_archives(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="not a tar or zip"):
        extract(tmp_path / "notes.txt", tmp_path / "target")
    assert not (tmp_path / "target").exists()


# Each malicious archive is extracted to work/resources/target; "outside" is work/outside, where an escape would land.
MALICIOUS: dict[str, tuple[Callable[[Path], list[TarEntry]], str]] = {
    "parent": (lambda root: [file("ok.txt"), file("../evil.txt")], "../evil.txt"),
    "absolute": (lambda root: [file("ok.txt"), file(str(root / "outside/evil.txt"))], "/outside/evil.txt"),
    "symlink": (lambda root: [symlink("link", "../../outside"), file("link/evil.txt")], "'link'"),
    "absolute symlink": (lambda root: [symlink("link", str(root / "outside")), file("link/evil.txt")], "'link'"),
    "hardlink": (lambda root: [special("hl", tarfile.LNKTYPE, "../../outside/secret.txt")], "'hl'"),
    # x/up -> .. stays inside, and "x/up/.." is "x" on paper, but on disk it is the target's parent.
    "symlink chain": (
        lambda root: [
            special("x", tarfile.DIRTYPE),
            symlink("x/up", ".."),
            symlink("l2", "x/up/.."),
            file("l2/evil.txt"),
        ],
        "'l2'",
    ),
    "fifo": (lambda root: [file("ok.txt"), special("pipe", tarfile.FIFOTYPE)], "'pipe'"),
    "device": (lambda root: [special("disk", tarfile.BLKTYPE)], "'disk'"),
}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work/outside").mkdir(parents=True)
    (tmp_path / "work/outside/secret.txt").write_bytes(b"secret")
    (tmp_path / "work/resources").mkdir()
    return tmp_path / "work"


def assert_refused(archive: Path, work: Path, member: str) -> None:
    before = snapshot(work)
    with pytest.raises(UnsafeArchiveError, match="member .*" + member.replace(".", r"\.")) as err:
        extract(archive, work / "resources/target")
    assert str(archive) in str(err.value)
    assert snapshot(work) == before  # nothing written anywhere, not even the target or a temporary folder


@pytest.mark.parametrize("case", MALICIOUS, ids=list(MALICIOUS))
def test_unsafe_tar_is_refused_and_nothing_written(tmp_path: Path, work: Path, case: str) -> None:
    entries, member = MALICIOUS[case]
    archive = write_tar(tmp_path / "evil.tar.gz", entries(work))
    assert_refused(archive, work, member)


def test_zip_with_parent_path_is_refused(tmp_path: Path, work: Path) -> None:
    archive = write_zip(tmp_path / "evil.zip", [("ok.txt", b"ok"), ("../evil.txt", b"evil")])
    assert_refused(archive, work, "../evil.txt")


def test_zip_with_outside_symlink_is_refused(tmp_path: Path, work: Path) -> None:
    archive = write_zip(tmp_path / "evil.zip", [("ok.txt", b"ok")], symlinks={"link": "../../outside"})
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("link/evil.txt", b"evil")
    assert_refused(archive, work, "'link'")


def test_extracted_files_and_folders_get_the_mode_of_the_umask(tmp_path: Path, umask_mode: int) -> None:
    """Tar member modes are ignored, as zip extraction ignores them: a 0600 member (a tar made under umask 077)
    is readable by others under umask 022, and a 0666 member private under 077."""
    root, private, public = special("./", tarfile.DIRTYPE), file("./d/private.txt"), file("./d/public.txt")
    root[0].mode, private[0].mode, public[0].mode = 0o755, 0o600, 0o666
    tar = write_tar(tmp_path / "a.tar", [root, special("./d", tarfile.DIRTYPE), private, public])
    zipped = write_zip(tmp_path / "a.zip", [("d/", b""), ("d/private.txt", b"data")])
    folder_mode = umask_mode | (umask_mode & 0o444) >> 2  # the x bits where the r bits are: 0o755 or 0o700
    for archive in (tar, zipped):
        target = extract(archive, tmp_path / f"{archive.name}.d")
        found = {str(p.relative_to(target)): stat.S_IMODE(p.stat().st_mode) for p in [target, *target.rglob("*")]}
        files = {name: umask_mode for name in found if name.endswith(".txt")}
        assert found == {".": folder_mode, "d": folder_mode, **files}, archive.name
