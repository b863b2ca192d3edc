"""Config inputs resolved to local paths: folders, files, archives (extracted once) and checksums."""

import hashlib
import tarfile

import pytest

from zoomeval.sources import resolve


def test_archives_are_extracted_once_and_a_single_top_folder_is_entered(tmp_path):
    (tmp_path / "src" / "imagenet-a" / "n01498041").mkdir(parents=True)
    (tmp_path / "src" / "imagenet-a" / "n01498041" / "x.jpg").write_bytes(b"jpg")
    archive = tmp_path / "imagenet-a.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "src" / "imagenet-a", arcname="imagenet-a")
    work = tmp_path / "resources"
    root = resolve(str(archive), work)
    assert root == work / "imagenet-a.tar.d" / "imagenet-a"
    assert (root / "n01498041" / "x.jpg").read_bytes() == b"jpg"
    (root / "n01498041" / "x.jpg").write_bytes(b"kept")  # a second resolve reuses the extraction
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert resolve({"path": str(archive), "sha256": sha}, work) == root
    assert (root / "n01498041" / "x.jpg").read_bytes() == b"kept"
    assert resolve(str(archive), tmp_path / "other", unpack=False) == archive  # e.g. a torch checkpoint (a zip)


def test_plain_files_and_folders_pass_through_and_errors_name_the_path(tmp_path):
    csv = tmp_path / "LOC_val_solution.csv"
    csv.write_text("ImageId,PredictionString\n")
    assert resolve(str(csv), tmp_path / "r") == csv
    assert resolve({"path": str(tmp_path)}, tmp_path / "r") == tmp_path
    with pytest.raises(FileNotFoundError, match="missing.tar does not exist"):
        resolve(str(tmp_path / "missing.tar"), tmp_path / "r")
    with pytest.raises(ValueError, match="sha256 differs"):
        resolve({"path": str(csv), "sha256": "0" * 64}, tmp_path / "r")
