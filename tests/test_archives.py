import io
import os
import random
import shutil
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.zipcrypto import write_encrypted_zip
from zoomeval.datasets.archives import UnsafeArchiveError, check_complete, extract

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
    # Info-ZIP unzip (used for encrypted zips) would restore the stored modes
    encrypted = write_encrypted_zip(tmp_path / "e.zip", {"d/": b"", "d/private.txt": b"data"}, "pw", file_mode=0o600)
    folder_mode = umask_mode | (umask_mode & 0o444) >> 2  # the x bits where the r bits are: 0o755 or 0o700
    for archive in (tar, zipped, encrypted):
        target = extract(archive, tmp_path / f"{archive.name}.d", "pw")
        found = {str(p.relative_to(target)): stat.S_IMODE(p.stat().st_mode) for p in [target, *target.rglob("*")]}
        files = {name: umask_mode for name in found if name.endswith(".txt")}
        assert found == {".": folder_mode, "d": folder_mode, **files}, archive.name


# Encrypted zips (the traditional PKWARE cipher, as ObjectNet's) and complete-file checks

PASSWORD = "objectnetisatestset"
ENCRYPTED = {"on/": b"", "on/images/a/x.png": b"png" * 500, "on/mappings/m.json": b'{"a": 1}'}


def test_the_test_writer_makes_zips_that_independent_readers_decrypt(tmp_path: Path) -> None:
    for deflate in (True, False):
        archive = write_encrypted_zip(tmp_path / f"{deflate}.zip", ENCRYPTED, PASSWORD, deflate)
        with zipfile.ZipFile(archive) as zf:
            assert [info.flag_bits & 1 for info in zf.infolist()] == [0, 1, 1]
            with pytest.raises(RuntimeError, match="password required"):
                zf.read("on/mappings/m.json")
            assert all(zf.read(name, pwd=PASSWORD.encode()) == data for name, data in ENCRYPTED.items())
        if shutil.which("unzip"):
            test = subprocess.run(["unzip", "-t", "-P", PASSWORD, archive], capture_output=True, text=True)
            assert test.returncode == 0 and "No errors detected" in test.stdout


@pytest.mark.parametrize("tool", ["unzip", "python"])
def test_an_encrypted_zip_is_extracted_with_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tool: str
) -> None:
    if tool == "unzip" and not shutil.which("unzip"):
        pytest.skip("Info-ZIP unzip is not installed")
    if tool == "python":
        monkeypatch.setattr(shutil, "which", lambda name: None)
    archive = write_encrypted_zip(tmp_path / "on.zip", ENCRYPTED, PASSWORD)
    target = extract(archive, tmp_path / "out" / "target", PASSWORD)
    folders = {"on": None, "on/images": None, "on/images/a": None, "on/mappings": None}
    assert snapshot(target) == {**folders, "on/images/a/x.png": b"png" * 500, "on/mappings/m.json": b'{"a": 1}'}
    assert sorted(os.listdir(tmp_path / "out")) == ["target"]  # no temporary folder or link left
    assert ("pure Python" in capsys.readouterr().out) == (tool == "python")


def test_a_missing_or_wrong_password_names_the_key(tmp_path: Path) -> None:
    archive = write_encrypted_zip(tmp_path / "on.zip", ENCRYPTED, PASSWORD)
    with pytest.raises(ValueError, match="encrypted; set datasets.on.password to the archive's password"):
        extract(archive, tmp_path / "target", None, "datasets.on.password")
    with pytest.raises(ValueError, match="datasets.on.password is not the archive's password"):
        extract(archive, tmp_path / "target", "letmein", "datasets.on.password")
    assert sorted(os.listdir(tmp_path)) == ["on.zip"]


@pytest.mark.parametrize("tool", ["unzip", "python"])
def test_an_unsafe_encrypted_zip_is_refused(
    tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    if tool == "python":
        monkeypatch.setattr(shutil, "which", lambda name: None)
    archive = write_encrypted_zip(tmp_path / "evil.zip", {"ok.txt": b"ok", "../evil.txt": b"evil"}, PASSWORD)
    before = snapshot(work)
    with pytest.raises(UnsafeArchiveError, match=r"member '\.\./evil\.txt'"):
        extract(archive, work / "resources/target", PASSWORD)
    assert snapshot(work) == before


def tar_bytes(tmp_path: Path, mode: str) -> bytes:
    entries = [file(f"d/{i}.jpg", random.Random(i).randbytes(5000)) for i in range(3)]
    return write_tar(tmp_path / "full", entries, mode).read_bytes()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("x.tar", lambda t: tar_bytes(t, "w")[:7000], "not a complete tar archive"),
        ("x.tar.gz", lambda t: tar_bytes(t, "w:gz")[:7000], "not a complete tar archive"),
        ("x.tgz", lambda t: b"<html><body>Not found</body></html>", "not a complete tar archive"),
        ("x.zip", lambda t: write_zip(t / "z", [("a", b"a" * 100)]).read_bytes()[:-30], "not a complete zip archive"),
        ("x.json", lambda t: b'{"a": [1, ', "not a complete JSON document"),
    ],
)
def test_cut_or_wrong_files_are_not_complete(tmp_path: Path, name: str, content, problem: str) -> None:
    (tmp_path / "file").write_bytes(content(tmp_path))
    with pytest.raises(ValueError, match=problem):
        check_complete(tmp_path / "file", name)


def test_complete_files_and_unknown_kinds_pass(tmp_path: Path) -> None:
    (tmp_path / "t").write_bytes(tar_bytes(tmp_path, "w:gz"))
    check_complete(tmp_path / "t", "imagenet-a.tar.gz")
    check_complete(write_zip(tmp_path / "z", [("a", b"a")]), "x.zip")
    (tmp_path / "c").write_bytes(b"<html>")
    check_complete(tmp_path / "c", "LOC_val_solution.csv")  # no kind to check
