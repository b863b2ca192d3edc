"""Config inputs resolved to local paths: folders, files, archives (extracted by content) and checksums."""

import hashlib
import os
import tarfile
from pathlib import Path

import pytest

from tests.test_adapters import image_bytes
from zoomeval.core import checksums
from zoomeval.datasets.adapters import imagenet_a
from zoomeval.datasets.sources import resolve


def write_tar(archive: Path, files: dict[str, bytes]) -> str:
    """Write ``files`` (path inside the archive -> content) as a tar; return its sha256."""
    src = archive.with_name(archive.name + ".src")
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    archive.unlink(missing_ok=True)
    with tarfile.open(archive, "w") as tar:
        for name in sorted(files):
            tar.add(src / name, arcname=name)
    return hashlib.sha256(archive.read_bytes()).hexdigest()


JPEG = image_bytes("JPEG", (8, 8))


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust remembered hashes of files written a moment ago (the tests' files are not being written to)."""
    monkeypatch.setattr(checksums, "SETTLE_NS", -(10**18))


def test_archives_are_extracted_once_and_a_single_top_folder_is_entered(tmp_path, settled, capsys):
    archive = tmp_path / "imagenet-a.tar"
    sha = write_tar(archive, {"imagenet-a/n01498041/x.jpg": b"jpg"})
    work = tmp_path / "resources"
    root = resolve(str(archive), work)
    assert root == work / f"imagenet-a.tar.{sha}.d" / "imagenet-a"
    assert "holds one top-level folder 'imagenet-a', taken as the dataset root" in capsys.readouterr().out
    assert (root / "n01498041" / "x.jpg").read_bytes() == b"jpg"
    (root / "n01498041" / "x.jpg").write_bytes(b"kept")  # a second resolve reuses the extraction
    assert resolve({"path": str(archive), "sha256": sha}, work) == root
    assert (root / "n01498041" / "x.jpg").read_bytes() == b"kept"
    assert resolve(str(archive), tmp_path / "other", unpack=False) == archive  # e.g. a torch checkpoint (a zip)


@pytest.mark.parametrize("pinned", [True, False])
def test_a_changed_archive_is_extracted_afresh(tmp_path, settled, pinned):
    archive = tmp_path / "ds.tar"
    work = tmp_path / "resources"
    old = write_tar(archive, {f"ds/n01498041/{i}.jpg": b"old" for i in range(2)})
    spec = {"path": str(archive), "sha256": old} if pinned else str(archive)
    assert len(os.listdir(resolve(spec, work) / "n01498041")) == 2
    new = write_tar(archive, {f"ds/n01498041/{i}.jpg": b"new" for i in range(6)})
    spec = {"path": str(archive), "sha256": new} if pinned else str(archive)
    root = resolve(spec, work)
    assert root == work / f"ds.tar.{new}.d" / "ds"
    assert sorted(os.listdir(root / "n01498041")) == [f"{i}.jpg" for i in range(6)]
    assert (root / "n01498041" / "0.jpg").read_bytes() == b"new"


def test_an_archive_of_one_class_folder_is_not_entered(tmp_path, capsys):
    archive = tmp_path / "imagenet-a.tar"
    sha = write_tar(archive, {"n01498041/x.jpg": JPEG})
    root = resolve(str(archive), tmp_path / "resources")
    assert root == tmp_path / "resources" / f"imagenet-a.tar.{sha}.d"
    assert "its only top-level folder 'n01498041' is a class folder" in capsys.readouterr().out
    records, _ = imagenet_a(root)  # the adapter sees the class folder as a class
    assert [(r.image_id, r.labels) for r in records] == [("n01498041/x", [6])]
    v2 = tmp_path / "v2.tar"  # ImageNet-V2 names its class folders by index
    write_tar(v2, {"7/x.jpg": b"jpg"})
    assert (resolve(str(v2), tmp_path / "resources") / "7" / "x.jpg").is_file()


def test_plain_files_and_folders_pass_through_and_errors_name_the_path(tmp_path):
    csv = tmp_path / "LOC_val_solution.csv"
    csv.write_text("ImageId,PredictionString\n")
    assert resolve(str(csv), tmp_path / "r") == csv
    assert resolve({"path": str(tmp_path)}, tmp_path / "r") == tmp_path
    with pytest.raises(ValueError, match="datasets.x.root: .* is a folder, which a sha256 cannot pin"):
        resolve({"path": str(tmp_path), "sha256": "0" * 64}, tmp_path / "r", key="datasets.x.root")
    with pytest.raises(FileNotFoundError, match="datasets.x.root: .*missing.tar does not exist"):
        resolve(str(tmp_path / "missing.tar"), tmp_path / "r", key="datasets.x.root")
    with pytest.raises(ValueError, match="datasets.x.real: .* has sha256 [0-9a-f]{64}, not the config's 0{64}"):
        resolve({"path": str(csv), "sha256": "0" * 64}, tmp_path / "r", key="datasets.x.real")


def test_hashes_are_remembered_while_the_file_is_unchanged(tmp_path, settled, monkeypatch):
    data = tmp_path / "data.bin"
    data.write_bytes(b"one")
    hashed: list[Path] = []
    real = checksums.sha256_file
    monkeypatch.setattr(checksums, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert checksums.sha256(data, tmp_path / "cache") == hashlib.sha256(b"one").hexdigest()
    assert checksums.sha256(data, tmp_path / "cache") == hashlib.sha256(b"one").hexdigest()
    assert hashed == [data]
    before = data.stat()
    data.write_bytes(b"two")  # same size, and the old mtime put back: the ctime still tells
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert checksums.sha256(data, tmp_path / "cache") == hashlib.sha256(b"two").hexdigest()
    (tmp_path / "cache" / checksums.CACHE_NAME).write_text("{not json")  # a damaged cache is rebuilt
    assert checksums.sha256(data, tmp_path / "cache") == hashlib.sha256(b"two").hexdigest()
    assert len(hashed) == 3


def test_a_file_changed_just_before_hashing_is_hashed_again(tmp_path, monkeypatch):
    data = tmp_path / "data.bin"
    data.write_bytes(b"fresh")
    hashed: list[Path] = []
    real = checksums.sha256_file
    monkeypatch.setattr(checksums, "sha256_file", lambda p: hashed.append(p) or real(p))
    for _ in range(2):
        assert checksums.sha256(data, tmp_path / "cache") == hashlib.sha256(b"fresh").hexdigest()
    assert hashed == [data, data] and not (tmp_path / "cache").exists()
