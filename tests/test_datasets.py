"""The imagefolder adapter, the class-set policy and the dataset inputs of the paper's config."""

import re
from pathlib import Path

import pytest
import yaml
from PIL import Image

from zoomeval.core.classes import wnids
from zoomeval.core.config import DatasetConfig, InputSpec
from zoomeval.core.manifest import write_manifest
from zoomeval.datasets.adapters.imagefolder import imagefolder
from zoomeval.datasets.build import build_records, class_indices


def test_imagefolder_reads_wnid_folders_in_sorted_order(tmp_path):
    for wnid, names in {"n02123045": ["b.jpg", "a.png"], "n01440764": ["z.JPEG"]}.items():
        (tmp_path / wnid).mkdir()
        for k, name in enumerate(names):
            Image.new("RGB", (30 + k, 20)).save(tmp_path / wnid / name, format="PNG")
    (tmp_path / "n01440764" / "notes.txt").write_text("not an image")
    records, classes = imagefolder(tmp_path)
    assert classes is None
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
    assert len(wnids()) == 1000 and list(wnids()) == sorted(wnids())
    assert wnids()[281] == "n02123045"  # tabby


CLASS_INFO = """
import sys
from zoomeval.core.classes import description, wnids
ours = list(wnids()), [description(i) for i in range(1000)]
assert "timm" not in sys.modules and "torch" not in sys.modules, "imported timm"
from timm.data import ImageNetInfo
info = ImageNetInfo()
assert ours == (info.label_names(), [info.index_to_description(i) for i in range(1000)])
print("same")
"""


def test_the_class_info_is_timms_own_read_without_importing_timm() -> None:
    """The wnids and names as timm's ImageNetInfo gives them, read from its files without importing timm (and torch),
    which a dataset's manifest job would otherwise spend most of its time on."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", CLASS_INFO], capture_output=True, text=True)
    assert proc.stdout == "same\n", proc.stderr


def test_paper_config_pins_every_hugging_face_input_to_a_commit():
    """A Hugging Face dataset repo changes under the same name (imagenet-hard went from 13,925 to 10,980 images,
    with two shard sets side by side in between): the paper's config pins each hf input to a commit sha."""
    config = yaml.safe_load((Path(__file__).parents[1] / "config" / "paper.yaml").read_text())
    inputs = {
        f"datasets.{name}.{key}": spec
        for name, entry in config["datasets"].items()
        for key, spec in entry.items()
        if isinstance(spec, dict) and "hf" in spec
    }
    assert list(inputs) == ["datasets.imagenet_hard.parquet"]
    for key, spec in inputs.items():
        assert re.fullmatch(r"[0-9a-f]{40}", spec.get("revision", "")), key


def test_clashing_image_ids_are_named_with_their_files(tmp_path):
    folder = tmp_path / "n01440764"
    folder.mkdir()
    for name in ("a.jpg", "a.png", "b.png"):
        Image.new("RGB", (8, 8)).save(folder / name, format="PNG")
    records, _ = imagefolder(tmp_path)
    with pytest.raises(ValueError) as info:
        write_manifest(tmp_path / "manifest.parquet", records, "mine")
    message = str(info.value)
    assert "dataset 'mine': 1 image id(s) name more than one file" in message
    assert f"'n01440764/a': {folder / 'a.jpg'}, {folder / 'a.png'}" in message
    assert "b.png" not in message and not (tmp_path / "manifest.parquet").exists()


def test_build_records_dispatches_through_the_adapter_registry(tmp_path):
    """The adapter gets its inputs as keyword arguments, its declared options from the config, and ``image_dir``
    when it writes images."""
    (tmp_path / "n01440764").mkdir()
    Image.new("RGB", (9, 7)).save(tmp_path / "n01440764" / "x.png")
    folder = DatasetConfig(
        "mine", "imagefolder", {"root": InputSpec(path=str(tmp_path), plain=True)}, variants=("original",)
    )
    records, classes = build_records(folder, {"root": tmp_path}, tmp_path / "unused")
    assert [(r.image_id, r.labels, r.width, r.height) for r in records] == [("n01440764/x", [0], 9, 7)]
    assert classes is None and not (tmp_path / "unused").exists()
    clutter = DatasetConfig("d", "demo", scenes="clutter", variants=("original",))
    records, classes = build_records(clutter, {}, tmp_path / "images")
    assert len(records) == 8 and classes is None  # the clutter scenes, not the 12 standard ones
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == [f"demo_{k:03d}.png" for k in range(8)]
