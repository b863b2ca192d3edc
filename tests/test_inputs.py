"""Config inputs to local paths: what the workflow fetches and extracts, folders, files, archives (named by their
content) and checksums."""

import hashlib
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.test_adapters import image_bytes
from zoomeval.core import checksums
from zoomeval.core.config import ConfigError, InputSpec
from zoomeval.datasets.adapters.imagefolder import imagenet_a
from zoomeval.datasets.inputs import extract, fetch, local_file_sha256, local_path, plan, plan_all
from zoomeval.registries import load_config


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


def through(spec, tmp_path: Path, key: str = "root", unpack: bool = True) -> Path:
    """The local path the adapter reads for ``spec``, after the jobs the workflow would run for it."""
    item = plan("ds", key, InputSpec.from_config(spec), str(tmp_path / "resources"), unpack=unpack)
    if item.fetched:
        fetch(item)
    if item.extracted:
        shutil.rmtree(item.extracted, ignore_errors=True)  # Snakemake removes a directory output before its job
        extract(item)
    return local_path(item)


def test_an_archive_is_extracted_into_a_folder_named_by_its_content_and_a_single_top_folder_is_entered(
    tmp_path, settled, capsys
):
    archive = tmp_path / "imagenet-a.tar"
    sha = write_tar(archive, {"imagenet-a/n01498041/x.jpg": b"jpg"})
    item = plan("ds", "root", InputSpec.from_config(str(archive)), "res")
    assert (item.key, item.fetched, item.archive, item.extracted) == (
        "datasets.ds.root",
        None,
        str(archive),
        "res/ds/root.extracted",
    )
    root = through({"path": str(archive), "sha256": sha}, tmp_path)
    extracted = tmp_path / "resources" / "ds" / "root.extracted"
    assert root == extracted / f"imagenet-a.tar.{sha}.d" / "imagenet-a"
    assert "holds one top-level folder 'imagenet-a', taken as the dataset root" in capsys.readouterr().out
    assert (root / "n01498041" / "x.jpg").read_bytes() == b"jpg"
    checkpoint = plan("sam", "checkpoint", InputSpec.from_config(str(archive)), "res", unpack=False)
    assert (checkpoint.key, checkpoint.extracted) == ("sam.checkpoint", None)  # e.g. a torch checkpoint (a zip)
    assert local_path(checkpoint) == archive


@pytest.mark.parametrize("pinned", [True, False])
def test_an_archive_replaced_after_its_extraction_is_refused_until_extracted_again(tmp_path, settled, pinned):
    archive = tmp_path / "ds.tar"
    old = write_tar(archive, {f"ds/n01498041/{i}.jpg": b"old" for i in range(2)})
    spec = {"path": str(archive), "sha256": old} if pinned else str(archive)
    assert len(os.listdir(through(spec, tmp_path) / "n01498041")) == 2
    new = write_tar(archive, {f"ds/n01498041/{i}.jpg": b"new" for i in range(6)})
    spec = {"path": str(archive), "sha256": new} if pinned else str(archive)
    item = plan("ds", "root", InputSpec.from_config(spec), str(tmp_path / "resources"))
    with pytest.raises(ValueError, match=r"ds.tar changed since it was extracted .*--forcerun extract_archive"):
        local_path(item)  # Snakemake did not rerun the extraction (e.g. an older mtime): the content tells
    root = through(spec, tmp_path)
    assert root == tmp_path / "resources" / "ds" / "root.extracted" / f"ds.tar.{new}.d" / "ds"
    assert sorted(os.listdir(root / "n01498041")) == [f"{i}.jpg" for i in range(6)]
    assert (root / "n01498041" / "0.jpg").read_bytes() == b"new"


def test_an_archive_of_one_class_folder_is_not_entered(tmp_path, capsys):
    archive = tmp_path / "imagenet-a.tar"
    sha = write_tar(archive, {"n01498041/x.jpg": JPEG})
    root = through(str(archive), tmp_path)
    assert root == tmp_path / "resources" / "ds" / "root.extracted" / f"imagenet-a.tar.{sha}.d"
    assert "its only top-level folder 'n01498041' is a class folder" in capsys.readouterr().out
    records, _ = imagenet_a(root)  # the adapter sees the class folder as a class
    assert [(r.image_id, r.labels) for r in records] == [("n01498041/x", [6])]
    v2 = tmp_path / "v2.tar"  # ImageNet-V2 names its class folders by index
    write_tar(v2, {"7/x.jpg": b"jpg"})
    assert (through(str(v2), tmp_path / "v2") / "7" / "x.jpg").is_file()


def test_plain_files_and_folders_pass_through_and_errors_name_the_path(tmp_path):
    csv = tmp_path / "LOC_val_solution.csv"
    csv.write_text("ImageId,PredictionString\n")
    assert through(str(csv), tmp_path) == csv
    assert through({"path": str(tmp_path)}, tmp_path) == tmp_path
    with pytest.raises(ValueError, match="datasets.ds.root: .* is a folder, which a sha256 cannot pin"):
        through({"path": str(tmp_path), "sha256": "0" * 64}, tmp_path)
    with pytest.raises(FileNotFoundError, match="datasets.ds.root: .*missing.tar does not exist"):
        through(str(tmp_path / "missing.tar"), tmp_path)
    with pytest.raises(ValueError, match="datasets.ds.real: .* has sha256 [0-9a-f]{64}, not the config's 0{64}"):
        through({"path": str(csv), "sha256": "0" * 64}, tmp_path, key="real")


def test_urls_and_hugging_face_inputs_are_planned_by_name_under_the_resources_root():
    tar = plan("a", "root", InputSpec(url="https://x.org/d/imagenet-a.tar?dl=1"), "res")
    assert (tar.fetched, tar.archive, tar.extracted) == (
        "res/a/imagenet-a.tar",
        "res/a/imagenet-a.tar",
        "res/a/root.extracted",
    )
    labels = plan("v", "real", InputSpec(url="https://x.org/real.json"), "res")
    assert (labels.fetched, labels.extracted) == ("res/v/real.json", None)
    hard = plan("h", "parquet", InputSpec(hf="taesiri/imagenet-hard", pattern="*.parquet"), "/r")
    assert (hard.fetched, hard.extracted) == ("/r/h/parquet.hf", None)


def test_two_urls_with_one_file_name_are_refused():
    val = {"adapter": "imagenet_val", "images": {"url": "https://a/x.tar"}, "annotations": {"url": "https://b/x.tar"}}
    model = {"source": "embedded", "architecture": "a", "weights": "w"}
    config = load_config({"scales": [256], "models": {"m": model}, "datasets": {"v": val}}, check_paths=False)
    with pytest.raises(ConfigError, match=r"^datasets.v.annotations: its URL's file name is that of datasets.v"):
        plan_all(config)


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


def test_a_local_file_input_is_hashed_by_content_and_a_replaced_file_again(tmp_path, settled):
    """What the sam_masks param records: the file's sha256, hashed again once the file at the path is another."""
    resources = str(tmp_path / "resources")
    path, new = tmp_path / "sam.pth", tmp_path / "new.pth"
    path.write_bytes(b"old weights")
    new.write_bytes(b"new weights")
    item = plan("sam", "checkpoint", InputSpec(path=str(path)), resources, unpack=False)
    assert local_file_sha256(item, resources) == hashlib.sha256(b"old weights").hexdigest()
    assert (tmp_path / "resources" / "sam" / checksums.CACHE_NAME).is_file()
    os.replace(new, path)  # mv: same path, same size, new inode
    assert local_file_sha256(item, resources) == hashlib.sha256(b"new weights").hexdigest()
    url = plan("sam", "checkpoint", InputSpec(url="https://example.org/sam.pth"), resources, unpack=False)
    assert local_file_sha256(url, resources) is None  # a download: its sha256 is the config's
