"""The imagefolder adapter, the class-set policy and the dataset inputs of the paper's config."""

import re
from pathlib import Path

import pytest
import yaml
from PIL import Image

from zoomeval.core.classes import wnids
from zoomeval.core.manifest import write_manifest
from zoomeval.datasets.build import class_indices, imagefolder


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


def test_paper_config_pins_every_hugging_face_input_to_a_commit():
    """A Hugging Face dataset repo changes under the same name (imagenet-hard went from 13,925 to 10,980 images,
    with two shard sets side by side in between): the paper's config pins each hf input to a commit sha."""
    config = yaml.safe_load((Path(__file__).parents[1] / "config" / "paper.yaml").read_text())
    inputs = {f"datasets.{name}.{key}": spec for name, entry in config["datasets"].items()
              for key, spec in entry.items() if isinstance(spec, dict) and "hf" in spec}  # fmt: skip
    assert list(inputs) == ["datasets.imagenet_hard.parquet"]
    for key, spec in inputs.items():
        assert re.fullmatch(r"[0-9a-f]{40}", spec.get("revision", "")), key


def test_clashing_image_ids_are_named_with_their_files(tmp_path):
    folder = tmp_path / "n01440764"
    folder.mkdir()
    for name in ("a.jpg", "a.png", "b.png"):
        Image.new("RGB", (8, 8)).save(folder / name, format="PNG")
    records = imagefolder(tmp_path)
    with pytest.raises(ValueError) as info:
        write_manifest(tmp_path / "manifest.parquet", records, "mine")
    message = str(info.value)
    assert "dataset 'mine': 1 image id(s) name more than one file" in message
    assert f"'n01440764/a': {folder / 'a.jpg'}, {folder / 'a.png'}" in message
    assert "b.png" not in message and not (tmp_path / "manifest.parquet").exists()
