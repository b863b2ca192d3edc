"""Model source ``entry_point``: a model from the user's own installed package (entry-point group
``zoomeval.models``), its pinned checkpoint loaded strictly, its logits placed by the WordNet ids it states; what
cannot be trusted (an unknown or doubly provided name, a function that fails, a return value of another form,
class indices, a class named twice, a dataset class it has no logit for) is refused naming the entry point."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.own_models_fixture import DISTRIBUTION, save_weights, tiny_module, write_distribution
from zoomeval.cli import main
from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.config import ConfigError, InferenceSettings, ModelSpec
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.models import check_model, fetch_weights, load_model
from zoomeval.inference.standard_eval import eval_transform


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The fixture distribution installed on sys.path."""
    folder = write_distribution(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def entry(tmp_path, name: str = "tiny_net", classes: int = 1000, **keys) -> ModelSpec:
    path = tmp_path / f"{name}.pth"
    sha = save_weights(lambda: tiny_module(classes), path, seed=3)
    return ModelSpec("own", "entry_point", name, keys.pop("weights", sha), input_size=64, checkpoint=str(path), **keys)


def test_the_checkpoint_is_loaded_into_the_module_and_its_logits_placed_by_their_wnids(site, tmp_path) -> None:
    spec = entry(tmp_path)
    check_model(spec)
    fetch_weights(spec, tmp_path / "weights")
    loaded = load_model(spec, tmp_path / "weights")
    assert (loaded.mean, loaded.std, loaded.classes) == ((0.5,) * 3, (0.25,) * 3, None)
    assert loaded.provenance["entry_point"] == {
        "name": "tiny_net",
        "value": "zoomeval_tiny_models:tiny_net",
        "distribution": DISTRIBUTION,
        "version": "0.1",
    }
    by_hand = tiny_module()
    by_hand.load_state_dict(torch.load(tmp_path / "tiny_net.pth", weights_only=True))
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        logits, raw = loaded.module(x), by_hand.eval()(x)
    assert logits.shape == (2, NUM_CLASSES)
    assert torch.equal(logits, raw.flip(1))  # the entry point names the classes in reverse ImageNet order
    transform = eval_transform(spec, loaded.module)
    assert (transform.mean, transform.std) == ((0.5,) * 3, (0.25,) * 3)
    assert transform.crop_settings() == {"img_size": 64, "crop_pct": round(64 / 72, 4), "interpolation": "bicubic"}


def test_a_model_over_part_of_the_classes_is_scored_only_on_a_dataset_within_them(site, tmp_path) -> None:
    spec = entry(tmp_path, "tiny_subset", classes=200)
    fetch_weights(spec, tmp_path / "weights")
    loaded = load_model(spec, tmp_path / "weights")
    assert loaded.classes == tuple(range(200))
    with torch.inference_mode():
        logits = loaded.module(torch.randn(1, 3, 64, 64))
    assert (logits[0, 200:] == torch.finfo(torch.float32).min).all() and logits[0, :200].abs().max() < 1e3
    settings = InferenceSettings(device="cpu", threads=1)
    with pytest.raises(
        ValueError,
        match=r"model 'own' has no logit for 800 classes .*\(n\w+, n\w+, n\w+, n\w+, "
        r"n\w+, \.\.\.\): its class order does not cover",
    ):
        Classifier(spec, settings, None, loaded=loaded)
    subset = [0, 7, 199]
    classifier = Classifier(spec, settings, subset, loaded=loaded)
    with torch.inference_mode():
        columns = classifier.columns(classifier.logits(torch.randint(0, 256, (3, 64, 64, 3), dtype=torch.uint8)))
    assert set(columns["pred"]) <= set(subset) and set(columns["pred_full"]) <= set(range(200))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "tiny_nett",
            r"models.own.architecture: 'tiny_nett' is no entry point of group zoomeval.models \(zoomeval "
            r"list models entry_point\); closest: tiny_net",
        ),
        (
            "broken",
            r"models.own: entry point broken = zoomeval_tiny_models:broken \(zoomeval-tiny-models 0.1\) "
            r"failed: ZeroDivisionError: division by zero$",
        ),
        ("no_module", "returned a str as its module, not a torch.nn.Module"),
        ("class_indices", r"the class order holds 0, not a WordNet id; class indices are refused"),
        ("twice", r"the class order names \['n01440764'\] more than once"),
        (
            "no_normalize",
            r"evaluation transform is \['Resize', 'CenterCrop', 'ToTensor'\]; expected \.\.\., ToTensor, "
            "Normalize",
        ),
        ("two_values", r"returned tuple; return ModelDefinition\(module, transform, classes\)"),
    ],
)
def test_what_cannot_be_trusted_is_refused_naming_the_entry_point(site, tmp_path, name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_model(entry(tmp_path, name))


def test_a_wrong_sha256_another_normalisation_and_a_name_two_packages_give_are_refused(site, tmp_path, monkeypatch):
    spec = entry(tmp_path)
    with pytest.raises(ConfigError, match=f"tiny_net.pth: sha256 {spec.weights} does not match {'1' * 64}"):
        check_model(entry(tmp_path, weights="1" * 64))
    with pytest.raises(
        ConfigError,
        match=r"models.own.mean: \[0.485, 0.456, 0.406\] differs from the \[0.5, 0.5, "
        r"0.5\] of entry point tiny_net's transform",
    ):
        check_model(entry(tmp_path, mean=(0.485, 0.456, 0.406)))
    other = write_distribution(tmp_path / "other", "other-models", {"tiny_net": "tiny(), TRANSFORM, list(wnids())"})
    monkeypatch.syspath_prepend(str(other))
    with pytest.raises(ConfigError, match=r"'tiny_net' is given by 2 installed packages \(.*\); uninstall") as info:
        check_model(spec)
    assert "(other-models 0.1)" in str(info.value) and f"({DISTRIBUTION} 0.1)" in str(info.value)


def test_zoomeval_list_models_lists_the_installed_entry_points(site, capsys) -> None:
    assert main(["list", "models", "entry_point", "tiny*"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "tiny_net\tzoomeval_tiny_models:tiny_net (zoomeval-tiny-models 0.1)",
        "tiny_subset\tzoomeval_tiny_models:tiny_subset (zoomeval-tiny-models 0.1)",
    ]


def test_the_class_order_maps_a_permutation_and_refuses_unknown_wnids() -> None:
    from zoomeval.inference.class_order import ImageNetOrder, imagenet_indices

    order = np.random.default_rng(0).permutation(NUM_CLASSES)
    from zoomeval.core.classes import wnids

    indices = imagenet_indices([wnids()[i] for i in order], "test")
    assert indices == tuple(order)
    logits = torch.randn(3, NUM_CLASSES)
    placed = ImageNetOrder(torch.nn.Identity(), indices, None, "m")(logits)
    assert all(torch.equal(placed[:, order[k]], logits[:, k]) for k in range(NUM_CLASSES))
    with pytest.raises(ValueError, match="test: 'n99999999' is not an ImageNet-1k wnid"):
        imagenet_indices(["n99999999"], "test")
    with pytest.raises(ValueError, match="must be a non-empty list of WordNet ids"):
        imagenet_indices("n01440764", "test")
    with pytest.raises(ValueError, match=r"gave logits of shape \(3, 1000\), but its class order names 2 classes"):
        ImageNetOrder(torch.nn.Identity(), indices[:2], None, "m")(logits)
