"""The imagefolder adapter and the class-set policy."""

import pytest
from PIL import Image

from zoomeval.classes import wnids
from zoomeval.datasets import class_indices, imagefolder


def test_imagefolder_reads_wnid_folders_in_sorted_order(tmp_path):
    for wnid, names in {"n02123045": ["b.jpg", "a.png"], "n01440764": ["z.JPEG"]}.items():
        (tmp_path / wnid).mkdir()
        for k, name in enumerate(names):
            Image.new("RGB", (30 + k, 20)).save(tmp_path / wnid / name, format="PNG")
    (tmp_path / "n01440764" / "notes.txt").write_text("not an image")
    records = imagefolder(tmp_path)
    assert [r.image_id for r in records] == ["n01440764/z", "n02123045/a", "n02123045/b"]
    assert [r.labels for r in records] == [[0], [281], [281]]
    assert [(r.width, r.height) for r in records] == [(30, 20), (31, 20), (30, 20)]
    assert class_indices("subset", records) == [0, 281]
    assert class_indices("full", records) is None


def test_imagefolder_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        imagefolder(tmp_path / "missing")
    (tmp_path / "cats").mkdir()
    with pytest.raises(ValueError, match="'cats' is not an ImageNet-1k wnid"):
        imagefolder(tmp_path)


def test_wnids_are_the_sorted_1000():
    assert len(wnids()) == 1000 and wnids() == sorted(wnids())
    assert wnids()[281] == "n02123045"  # tabby
