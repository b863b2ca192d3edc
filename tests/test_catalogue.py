"""Model names as the libraries spell them, the libraries' catalogues, and the refusals that suggest the closest."""

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference import catalogue as cat
from zoomeval.inference.models import MODEL_SOURCES
from zoomeval.registries import REGISTRIES

FAKE = cat.Catalogue("lib", "1.0", ("resnet50", "resnet18", "vit_b_16"), {"resnet50": ("a1_in1k", "a2_in1k")})


def spec(source: str, **entry: str) -> ModelSpec:
    return ModelSpec.from_config("m", {"source": source, **entry}, REGISTRIES.sources)


def test_timm_takes_the_tag_from_arch_dot_tag_and_refuses_a_disagreeing_weights() -> None:
    assert (
        spec("timm", architecture="resnet50.a1_in1k").architecture,
        spec("timm", architecture="resnet50.a1_in1k").weights,
    ) == ("resnet50", "a1_in1k")
    same = spec("timm", architecture="resnet50.a1_in1k", weights="a1_in1k")
    assert same == spec("timm", architecture="resnet50", weights="a1_in1k")  # one spelling, one set of jobs
    with pytest.raises(ConfigError, match=r"models.m.weights: 'a2_in1k' disagrees with the tag 'a1_in1k'"):
        spec("timm", architecture="resnet50.a1_in1k", weights="a2_in1k")
    with pytest.raises(ConfigError, match=r"models.m.weights: required for a timm architecture without a tag"):
        spec("timm", architecture="resnet50")


def test_torchvision_takes_its_weight_enum_names() -> None:
    assert spec("torchvision", architecture="resnet50", weights="ResNet50_Weights.IMAGENET1K_V2").weights == (
        "IMAGENET1K_V2"
    )
    assert spec("torchvision", architecture="vit_b_16", weights="ViT_B_16_Weights.IMAGENET1K_V1").weights == (
        "IMAGENET1K_V1"
    )
    with pytest.raises(ConfigError, match="models.m.weights: ResNet18_Weights is not the weights enum of resnet50"):
        spec("torchvision", architecture="resnet50", weights="ResNet18_Weights.IMAGENET1K_V1")


def test_every_torchvision_weight_enum_is_named_after_its_architecture() -> None:
    """The rule canonical() relies on, checked against torchvision itself."""
    import torchvision

    for arch in torchvision.models.list_models(module=torchvision.models):
        enum = torchvision.models.get_model_weights(arch)
        assert enum.__name__.casefold() == f"{arch}_weights".casefold(), arch
        for weights in enum:
            resolved = spec("torchvision", architecture=arch, weights=f"{enum.__name__}.{weights.name}")
            assert torchvision.models.get_weight(f"{enum.__name__}.{weights.name}") is enum[resolved.weights]


def test_the_catalogues_are_the_libraries_own_lists() -> None:
    import open_clip
    import timm
    import torchvision

    timm_cat = cat.catalogue("timm")
    assert sorted(f"{a}.{t}" for a, t in cat.matching(timm_cat)) == sorted(timm.list_pretrained())
    assert [f"{a}.{t}" for a, t in cat.matching(timm_cat, "resnet50.a*")] == timm.list_pretrained("resnet50.a*")
    assert set(timm_cat.architectures) == set(timm.list_models())
    tv = cat.catalogue("torchvision")
    assert tv.pretrained["resnet50"] == ("IMAGENET1K_V1", "IMAGENET1K_V2")
    assert len(cat.matching(tv)) == sum(len(torchvision.models.get_model_weights(a)) for a in tv.architectures)
    assert sorted(cat.matching(cat.catalogue("open_clip"))) == sorted(open_clip.list_pretrained())
    assert [s.name for s in MODEL_SOURCES.values() if s.names] == ["entry_point", "open_clip", "timm", "torchvision"]


def test_a_misspelt_name_is_refused_with_the_closest_names() -> None:
    with pytest.raises(ConfigError) as refused:
        cat.check_names(spec("timm", architecture="resnet5", weights="a1_in1k"), FAKE, "timm")
    expected = difflib.get_close_matches("resnet5", ["resnet50"], cutoff=0.5)
    assert str(refused.value) == (
        f"models.m.architecture: 'resnet5' is not a timm model (zoomeval list models timm);"
        f" closest: {', '.join(expected)}"
    )
    with pytest.raises(
        ConfigError,
        match=r"models.m.weights: 'a1_in1' is not a pretrained tag of resnet50 "
        r"\['a1_in1k', 'a2_in1k'\]; closest: a1_in1k, a2_in1k",
    ):
        cat.check_names(spec("timm", architecture="resnet50.a1_in1"), FAKE, "timm")
    cat.check_names(spec("timm", architecture="resnet50.a2_in1k"), FAKE, "timm")  # a known one passes
    with pytest.raises(ConfigError, match=r"'resnet18' has no pretrained tag|not a pretrained tag of resnet18 \[\]"):
        cat.check_names(spec("timm", architecture="resnet18.x"), FAKE, "timm")


@pytest.mark.parametrize(
    ("source", "entry", "why"),
    [
        (
            "timm",
            {"architecture": "resnet50_clip.openai"},
            "a 1024-wide output (timm's config), not ImageNet-1k's 1000 classes",
        ),
        (
            "timm",
            {"architecture": "convnext_tiny.dinov3_lvd1689m"},
            "no classifier head (timm's config gives 0 outputs: a feature extractor)",
        ),
        ("timm", {"architecture": "vit_base_patch16_224.augreg_in21k"}, "a 21843-wide output"),
        ("torchvision", {"architecture": "vgg16", "weights": "IMAGENET1K_FEATURES"}, "no classifier head"),
    ],
)
def test_a_model_whose_head_is_not_imagenet_1k_is_refused_from_the_librarys_own_config(source, entry, why) -> None:
    """The widths are the libraries' pretrained configs (timm's num_classes, torchvision's categories), read offline;
    before, these names passed `snakemake -n` and their predictions meant nothing."""
    catalogue = cat.catalogue(source)
    model = spec(source, **entry)
    with pytest.raises(ConfigError) as refused:
        cat.check_names(model, catalogue, source)
    assert str(refused.value).startswith(f"models.m: {model.architecture}.{model.weights} has {why}")
    assert f"(zoomeval list models {source} '{model.architecture}.*' marks the others)" in str(refused.value)


def test_imagenet_1k_classifiers_pass_and_the_widths_are_the_libraries() -> None:
    import timm
    import torchvision
    from timm.models import get_pretrained_cfg

    for source, entry in (
        ("timm", {"architecture": "resnet50.a1_in1k"}),
        ("timm", {"architecture": "convnext_tiny.in12k_ft_in1k"}),
        ("torchvision", {"architecture": "vgg16", "weights": "IMAGENET1K_V1"}),
    ):
        cat.check_names(spec(source, **entry), cat.catalogue(source), source)
    widths = cat.catalogue("timm").widths
    assert set(widths) == set(timm.list_pretrained())
    assert all(widths[name] == get_pretrained_cfg(name).num_classes for name in timm.list_pretrained("resnet*"))
    weights = torchvision.models.get_model_weights("vit_b_16")
    assert {cat.catalogue("torchvision").widths[f"vit_b_16.{w.name}"] for w in weights} == {1000}


def test_the_cached_catalogue_is_written_once_by_a_child_process(tmp_path: Path, monkeypatch) -> None:
    from importlib.metadata import version

    calls = []
    run = subprocess.run
    monkeypatch.setattr(cat.subprocess, "run", lambda *a, **k: calls.append(a) or run(*a, **k))
    first = cat.cached_catalogue("torchvision", tmp_path)
    assert first == cat.catalogue("torchvision") and len(calls) == 1 and calls[0][0][0] == sys.executable
    path = tmp_path / f"torchvision-{version('torchvision')}.v{cat.LAYOUT}.json"
    assert json.loads(path.read_text())["pretrained"]["resnet50"] == ["IMAGENET1K_V1", "IMAGENET1K_V2"]
    assert cat.cached_catalogue("torchvision", tmp_path) == first and len(calls) == 1  # read, not written again


def test_open_clip_takes_the_hf_hub_names_of_its_pretrained_list(tmp_path: Path, monkeypatch) -> None:
    from open_clip.pretrained import get_pretrained_cfg

    monkeypatch.chdir(tmp_path)  # the catalogue is cached under .snakemake/zoomeval, as in a workflow run
    assert get_pretrained_cfg("ViT-B-32", "laion2b_s34b_b79k")["hf_hub"] == "laion/CLIP-ViT-B-32-laion2B-s34B-b79K/"
    named = spec("open_clip", architecture="hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K")
    assert (named.architecture, named.weights, named.input_size) == ("ViT-B-32", "laion2b_s34b_b79k", 224)
    assert (tmp_path / cat.CACHE).is_dir()
    # RN50 and RN50-quickgelu share OpenAI's repo: the plain architecture (the tag's QuickGELU builds them alike)
    assert get_pretrained_cfg("RN50-quickgelu", "openai")["hf_hub"] == get_pretrained_cfg("RN50", "openai")["hf_hub"]
    twin = spec("open_clip", architecture="hf-hub:timm/resnet50_clip.openai")
    assert (twin.architecture, twin.weights) == ("RN50", "openai")
    with pytest.raises(ConfigError, match="models.m.weights: 'openai' disagrees with hf-hub:laion/CLIP-ViT-B-32"):
        spec("open_clip", architecture="hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K", weights="openai")
    with pytest.raises(ConfigError, match="models.m.architecture: hf-hub:me/mine: no pretrained tag of open_clip"):
        spec("open_clip", architecture="hf-hub:me/mine")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"source": "torchvision", "architecture": "resnet50"}, "'weights' is a required property"),
        ({"source": "open_clip", "architecture": "ViT-B-32"}, "'weights' is a required property"),
        ({"source": "torchvision", "architecture": "hf-hub:a/b", "weights": "X"}, "hf-hub: names are open_clip's"),
    ],
    ids=["torchvision-without-weights", "open_clip-without-weights", "hf-hub-of-torchvision"],
)
def test_the_schema_lets_weights_out_only_where_the_name_carries_them(entry, message) -> None:
    from tests.conftest import ROOT
    from zoomeval.registries import load_config

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["models"] = {"m": entry}
    with pytest.raises(ConfigError, match=f"models.m: {re.escape(message)}|models.m.architecture: .*{message}"):
        load_config(config, check_paths=False)
    config["models"] = {"m": {"source": "timm", "architecture": "resnet50.a1_in1k"}}
    assert load_config(config, check_paths=False).models["m"].weights == "a1_in1k"


def test_a_library_that_cannot_list_its_models_is_refused_with_its_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cat.sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match=r"listing torchvision .*'s models failed \(zoomeval list models"):
        cat.cached_catalogue("torchvision", tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing cached
