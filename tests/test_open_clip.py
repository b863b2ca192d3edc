"""The open_clip source and its zero-shot head, offline: a tiny random-initialised open_clip architecture registered
through open_clip's own model-config mechanism, its checkpoint as a local file or in huggingface_hub's cache under
a pretrained tag, loaded by the real code path."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import pyarrow.parquet as pq
import pytest
import safetensors.torch
import torch
from open_clip.pretrained import _pcfg
from PIL import Image

from tests.test_models import hf_cache, no_network, put_in_hf_cache  # noqa: F401 (fixtures)
from zoomeval.core.classes import _wnid_indices
from zoomeval.core.config import ConfigError, InferenceSettings, MemoSettings, ModelSpec
from zoomeval.core.manifest import Record
from zoomeval.datasets.adapters.imagefolder import _timm_synsets
from zoomeval.inference import zero_shot
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.models import (
    MODEL_SOURCES,
    check_model,
    fetch_weights,
    head_name,
    load_model,
    weights_folder,
)
from zoomeval.inference.sources.open_clip_models import build_head, create
from zoomeval.inference.tta import run_tta_to_file
from zoomeval.inference.tta_views import standard_view

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_open_clip")

ARCH = "zoomeval-tiny-clip"
#: A ViT with one layer per tower and 32-px inputs; the real vocabulary, so open_clip's tokenizer works unchanged.
TINY_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
TEMPLATES = ("a photo of a {}.", "a sketch of the {}.")
IMAGENET_A = sorted(_wnid_indices()[w] for w in _timm_synsets("imagenet_a_synsets.txt"))
SETTINGS = InferenceSettings(device="cpu", threads=1)


def write_tiny_clip(folder: Path, seed: int = 0) -> dict[str, str]:
    """The tiny architecture's model config, a random-init checkpoint and a two-template file in ``folder``;
    returns an ``open_clip`` config entry for them."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{ARCH}.json"
    config.write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(config)
    torch.manual_seed(seed)
    weights = folder / "tiny.safetensors"
    safetensors.torch.save_file(open_clip.create_model(ARCH).state_dict(), weights)
    templates = folder / "templates.txt"
    templates.write_text("".join(f"{t}\n" for t in TEMPLATES))
    return {
        "source": "open_clip",
        "architecture": ARCH,
        "weights": "tiny",
        "checkpoint": str(weights),
        "model_config": str(config),
        "templates": str(templates),
        "duplicate_names": "keep_first",
    }


def spec_of(entry: dict[str, Any], name: str = "tiny") -> ModelSpec:
    return ModelSpec.from_config(name, entry, MODEL_SOURCES)


def fetched(entry: dict[str, Any], folder: Path) -> Path:
    """The entry's weights placed in ``folder`` as the fetch_weights job places them."""
    fetch_weights(spec_of(entry), folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, str]:
    return write_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))


@pytest.fixture(scope="module")
def tiny_weights(tiny, tmp_path_factory) -> Path:
    return fetched(tiny, tmp_path_factory.mktemp("weights") / "tiny")


@pytest.fixture(scope="module")
def tiny_head(tiny, tiny_weights, tmp_path_factory) -> Path:
    head, provenance = build_head(spec_of(tiny), tiny_weights, torch.device("cpu"))
    path = tmp_path_factory.mktemp("head") / "head.safetensors"
    zero_shot.write_head(path, head, provenance)
    return path


# class names and templates


def test_default_templates_are_the_80_openai_templates_as_format_strings():
    prompts = zero_shot.templates()
    assert len(prompts.items) == 80 and prompts.source == zero_shot.DEFAULT_TEMPLATES
    for template, original in zip(prompts.items, open_clip.OPENAI_IMAGENET_TEMPLATES, strict=True):
        for name in ("tench", "projectile", "dark glasses"):
            assert template.format(name) == original(name)
    assert prompts.items[0] == "a bad photo of a {}."


def test_lists_are_recorded_by_the_sha256_of_their_lines(tmp_path):
    names = zero_shot.class_names()
    assert len(names.items) == 1000 and names.items[0] == "tench" and names.source == zero_shot.DEFAULT_CLASS_NAMES
    (tmp_path / "names.txt").write_text("\n".join(names.items) + "\n")
    again = zero_shot.class_names(tmp_path / "names.txt")
    assert again.items == names.items and again.source == str(tmp_path / "names.txt")
    assert again.sha256 == names.sha256 == hashlib.sha256((tmp_path / "names.txt").read_bytes()).hexdigest()
    (tmp_path / "t.txt").write_text("a photo of a {}.\n")
    assert zero_shot.templates(tmp_path / "t.txt").sha256 == hashlib.sha256(b"a photo of a {}.\n").hexdigest()


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("tench\n" * 999, "class_names", "has 999 class names; it needs one per ImageNet class"),
        ("tench\n" * 500 + "\n" + "tench\n" * 499, "class_names", "line 501 is empty"),
        ("a photo of a thing.\n", "templates", "must contain {} exactly once"),
        ("a {} of a {}.\n", "templates", "must contain {} exactly once"),
        ("a {photo} of a {}.\n", "templates", "no other brace"),
    ],
)
def test_bad_lists_are_refused_naming_the_key(tmp_path, text, kind, message):
    (tmp_path / "list.txt").write_text(text)
    with pytest.raises(ValueError, match=f"models.x.{kind}: .*{message}"):
        getattr(zero_shot, kind)(tmp_path / "list.txt", f"models.x.{kind}")


# duplicate names


def test_the_curated_names_repeat_two_names():
    assert zero_shot.duplicates(zero_shot.class_names().items) == {"missile": [657, 744], "sunglasses": [836, 837]}


def test_keep_first_keeps_the_names_and_lists_the_classes_argmax_cannot_return():
    names = zero_shot.class_names().items
    resolved, record = zero_shot.resolve_duplicates(names, "keep_first")
    assert resolved == names
    assert record["unpredictable"] == [744, 837] and record["renamed"] == {}


def test_wordnet_lemmas_gives_each_class_of_a_repeated_name_its_own_lemma():
    names = zero_shot.class_names().items
    resolved, record = zero_shot.resolve_duplicates(names, "wordnet_lemmas")
    assert record["renamed"] == {"744": "projectile", "836": "sunglass"}
    assert [resolved[i] for i in (657, 744, 836, 837)] == ["missile", "projectile", "sunglass", "sunglasses"]
    assert len(set(resolved)) == 1000 and record["unpredictable"] == []
    assert [i for i, (a, b) in enumerate(zip(names, resolved, strict=True)) if a != b] == [744, 836]


def test_wordnet_lemmas_refuses_a_group_it_cannot_separate():
    names = list(zero_shot.class_names().items)
    names[0] = names[1] = "goldfish"  # tench (0) has the lemmas "tench, Tinca tinca"; goldfish (1) "goldfish, ..."
    names[2:4] = ["tench", "Tinca tinca"]  # ... which other classes now use
    with pytest.raises(ValueError, match="no unused WordNet lemma for class 0"):
        zero_shot.resolve_duplicates(tuple(names), "wordnet_lemmas")


def test_under_keep_first_argmax_returns_the_first_of_two_equal_classes(tiny, tiny_weights, tiny_head):
    head, _ = zero_shot.read_head(tiny_head)
    assert torch.equal(head[657], head[744]) and torch.equal(head[836], head[837])
    logits = zero_shot.LOGIT_SCALE * head[[744, 837]] @ head.T  # image features equal to the later classes' rows
    assert logits.argmax(dim=1).tolist() == [657, 836]
    renamed, _ = build_head(spec_of({**tiny, "duplicate_names": "wordnet_lemmas"}), tiny_weights, torch.device("cpu"))
    assert not torch.equal(renamed[657], renamed[744])
    assert (zero_shot.LOGIT_SCALE * renamed[[744, 837]] @ renamed.T).argmax(dim=1).tolist() == [744, 837]


# the head


def brute_force_row(model, tokenizer, name: str) -> torch.Tensor:
    """One class's head row, one text at a time: each template's embedding normalised, averaged, renormalised."""
    with torch.inference_mode():
        embeddings = [model.encode_text(tokenizer([t.format(name)]))[0] for t in TEMPLATES]
    mean = torch.stack([e / torch.linalg.vector_norm(e) for e in embeddings]).mean(dim=0)
    return mean / torch.linalg.vector_norm(mean)


def test_the_head_equals_a_brute_force_computation(tiny, tiny_weights, tiny_head):
    head, provenance = zero_shot.read_head(tiny_head)
    model, _, _ = create(spec_of(tiny), tiny_weights)
    tokenizer = open_clip.get_tokenizer(ARCH)
    names = zero_shot.class_names().items
    assert head.shape == (1000, 16) and head.dtype == torch.float32
    for index in (0, 1, 409, 657, 744, 836, 999):
        torch.testing.assert_close(head[index], brute_force_row(model, tokenizer, names[index]), atol=1e-6, rtol=0)
    # and open_clip's own implementation of the recipe agrees on every class
    reference = open_clip.build_zero_shot_classifier(model, tokenizer, names, TEMPLATES, num_classes_per_batch=50)
    torch.testing.assert_close(head, reference.T, atol=1e-6, rtol=0)
    assert provenance["template_list"] == list(TEMPLATES) and provenance["duplicate_policy"] == "keep_first"
    assert provenance["class_names_sha256"] == zero_shot.class_names().sha256
    assert provenance["templates_sha256"] == hashlib.sha256("".join(f"{t}\n" for t in TEMPLATES).encode()).hexdigest()
    assert provenance["weights_sha256"] == hashlib.sha256(Path(tiny["checkpoint"]).read_bytes()).hexdigest()
    assert provenance["open_clip"] == open_clip.__version__ == "3.3.0"


def test_a_file_that_is_not_a_head_is_refused(tmp_path):
    safetensors.torch.save_file({"head": torch.zeros(2, 2)}, tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="not a zero-shot head of schema version 1"):
        zero_shot.read_head(tmp_path / "other.safetensors")


# loading


def test_the_classifier_is_100_times_the_cosine_to_the_head(tiny, tiny_weights, tiny_head):
    loaded = load_model(spec_of(tiny), tiny_weights, tiny_head)
    head, _ = zero_shot.read_head(tiny_head)
    x = torch.rand(3, 3, 32, 32)
    with torch.inference_mode():
        features = loaded.module.model.encode_image(x)
        expected = 100 * (features / features.norm(dim=1, keepdim=True)) @ head.T
        torch.testing.assert_close(loaded.module(x), expected, atol=1e-4, rtol=1e-5)
    assert loaded.weights_sha256 == hashlib.sha256(Path(tiny["checkpoint"]).read_bytes()).hexdigest()
    assert (loaded.mean, loaded.std) == (open_clip.OPENAI_DATASET_MEAN, open_clip.OPENAI_DATASET_STD)
    record = loaded.provenance["zero_shot"]
    assert record["duplicate_names"]["unpredictable"] == [744, 837] and record["template_list"] == list(TEMPLATES)


def test_a_head_computed_for_other_settings_is_refused(tiny, tiny_weights, tiny_head, tmp_path):
    other = tmp_path / "templates.txt"
    other.write_text("a photo of a {}.\n")
    with pytest.raises(ValueError, match=r"computed for other settings .*templates_sha256.*--forcerun zero_shot_head"):
        load_model(spec_of({**tiny, "templates": str(other)}), tiny_weights, tiny_head)
    with pytest.raises(ValueError, match="needs its zero-shot head file"):
        load_model(spec_of(tiny), tiny_weights)


def test_a_pretrained_tag_loads_from_the_hugging_face_cache_with_the_tags_settings(
    tiny,
    hf_cache,  # noqa: F811 (a fixture)
    no_network,  # noqa: F811 (a fixture)
    monkeypatch,
    tmp_path,
):
    # A tag of the tiny architecture as open_clip declares its own: weights in a hub repo, QuickGELU, its mean/std.
    tag = _pcfg(hf_hub="zoomeval/tiny-clip/", quick_gelu=True, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    monkeypatch.setitem(open_clip.pretrained._PRETRAINED, ARCH, {"random": tag})
    torch.manual_seed(3)
    state = open_clip.create_model(ARCH, force_quick_gelu=True).state_dict()
    data = safetensors.torch.save(state)
    # open_clip asks for the safetensors alternative of open_clip_pytorch_model.bin first
    snapshot = put_in_hf_cache(hf_cache, "zoomeval/tiny-clip", "open_clip_model.safetensors", data)
    entry = {k: v for k, v in {**tiny, "weights": "random"}.items() if k != "checkpoint"}

    model, path, sha = create(spec_of(entry), fetched(entry, tmp_path / "weights"))

    assert path.name == f"{sha}.safetensors" and sha == hashlib.sha256(data).hexdigest()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert isinstance(model.transformer.resblocks[0].mlp.gelu, open_clip.transformer.QuickGELU)
    assert (model.visual.preprocess_cfg["mean"], model.visual.preprocess_cfg["std"]) == (tag["mean"], tag["std"])
    assert no_network == []
    snapshot.resolve().write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped in the cached blob
    with pytest.raises(ValueError, match="does not match"):
        fetched(entry, tmp_path / "again")
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # in the weights folder (a hard link: the same file)
    with pytest.raises(ValueError, match="does not match"):
        create(spec_of(entry), tmp_path / "weights")


# subset class sets


@pytest.mark.parametrize("subset", [IMAGENET_A, sorted({744, 837, *range(0, 1000, 9)})], ids=["in_a_200", "113"])
def test_subset_class_sets_mask_the_zero_shot_logits_as_for_other_models(tiny, tiny_weights, tiny_head, subset):
    classifier = Classifier(spec_of(tiny), SETTINGS, subset, tiny_weights, head=tiny_head)
    crops = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    with torch.inference_mode():
        logits = classifier.logits(crops)
        columns = classifier.columns(logits)
    index = torch.tensor(subset)
    probs = logits[:, index].softmax(dim=1)
    assert columns["pred"].tolist() == index[logits[:, index].argmax(dim=1)].tolist()
    assert set(columns["pred"].tolist()) <= set(subset)
    assert columns["pred_full"].tolist() == logits.argmax(dim=1).tolist()
    np.testing.assert_allclose(columns["conf"], probs.max(dim=1).values.numpy(), rtol=1e-6)


def test_a_later_duplicate_is_predictable_once_its_twin_is_outside_the_class_set(tiny, tiny_weights, tiny_head):
    head, _ = zero_shot.read_head(tiny_head)
    logits = zero_shot.LOGIT_SCALE * head[[744]] @ head.T  # ties between 657 and 744
    full = Classifier(spec_of(tiny), SETTINGS, None, tiny_weights, head=tiny_head)
    assert full.columns(logits)["pred"].tolist() == [657]
    subset = [i for i in range(1000) if i != 657]  # e.g. a dataset whose classes include 744 but not 657
    masked = Classifier(spec_of(tiny), SETTINGS, subset, tiny_weights, head=tiny_head)
    assert masked.columns(logits)["pred"].tolist() == [744]


# config


def test_config_defaults_follow_the_model(tiny):
    clip = spec_of({"source": "open_clip", "architecture": "ViT-L-14-336", "weights": "openai"}, "clip")
    assert clip.input_size == 336 and clip.options.duplicate_names == "keep_first"
    check_model(clip)
    assert spec_of({k: v for k, v in tiny.items() if k != "duplicate_names"}).input_size == 32
    with pytest.raises(ConfigError, match=r"models.x.architecture: 'ViT-Nope' is not an open_clip architecture"):
        spec_of({"source": "open_clip", "architecture": "ViT-Nope", "weights": "openai"}, "x")
    resnet = spec_of({"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V1"}, "r")
    assert resnet.input_size == 224 and resnet.options is None
    assert resnet.entry() == {
        "architecture": "resnet50",
        "input_size": 224,
        "source": "torchvision",
        "weights": "IMAGENET1K_V1",
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"weights": "openia"}, r"models.m.weights: 'openia' is not a pretrained tag of ViT-L-14 \(\['openai'"),
        ({"input_size": 336}, "models.m.input_size: ViT-L-14 takes 224 px inputs, not 336"),
        ({"templates": "/nonexistent/t.txt"}, "models.m.templates: /nonexistent/t.txt does not exist"),
        ({"architecture": "ViT-L-14-quickgelu", "weights": "datacomp_xl_s13b_b90k"}, "is not a pretrained tag"),
        ({"checkpoint": "/nonexistent/c.pt"}, "models.m.checkpoint: /nonexistent/c.pt must be an existing"),
    ],
)
def test_config_refusals_name_the_key(change, message):
    entry = {"source": "open_clip", "architecture": "ViT-L-14", "weights": "openai", "input_size": 224, **change}
    with pytest.raises(ConfigError, match=message):
        check_model(spec_of(entry, "m"))


def test_a_model_config_must_be_named_after_its_architecture(tiny, tmp_path):
    (tmp_path / "other.json").write_text(json.dumps(TINY_CONFIG))
    with pytest.raises(ConfigError, match=r"models.m.model_config: .*other.json must be an existing file named "):
        spec_of({**tiny, "model_config": str(tmp_path / "other.json")}, "m")
    (tmp_path / "ViT-L-14.json").write_text(json.dumps(TINY_CONFIG))
    with pytest.raises(ConfigError, match="already an open_clip architecture with another config"):
        check_model(spec_of({**tiny, "architecture": "ViT-L-14", "model_config": str(tmp_path / "ViT-L-14.json")}, "m"))


def test_open_clip_keys_on_another_source_are_refused():
    entry = {"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V1", "templates": "t.txt"}
    with pytest.raises(ConfigError, match="models.r.templates: only source open_clip reads it"):
        spec_of(entry, "r")


def test_the_head_file_name_changes_with_what_the_head_depends_on(tiny, tmp_path):
    res = str(tmp_path / "res")
    name = head_name(spec_of(tiny), res)
    assert name.startswith(f"{ARCH}.tiny.") and name == head_name(spec_of({**tiny, "mean": [0.5] * 3}), res)
    assert name != head_name(spec_of({**tiny, "duplicate_names": "wordnet_lemmas"}), res)
    assert name != head_name(spec_of({k: v for k, v in tiny.items() if k != "templates"}), res)
    (tmp_path / "t.txt").write_text("a photo of a {}.\n")
    assert name != head_name(spec_of({**tiny, "templates": str(tmp_path / "t.txt")}), res)
    clip = spec_of({"source": "open_clip", "architecture": "ViT-L-14", "weights": "openai"})
    assert head_name(clip, res).startswith("ViT-L-14.openai.") and head_name(spec_of(tiny, "other"), res) == name
    with pytest.raises(ConfigError, match="models.tiny.templates: /nonexistent does not exist"):
        head_name(spec_of({**tiny, "templates": "/nonexistent"}), res)


def test_a_local_checkpoint_is_kept_and_its_head_named_by_its_content_not_its_path(tiny, tmp_path):
    """Two files under one ``weights`` name get two folders and two heads; a copy of one file elsewhere shares
    them; a file replaced at its path gets new ones (its sha256 is hashed again: inode and ctime changed)."""
    res = str(tmp_path / "res")
    copy = tmp_path / "copy.safetensors"
    copy.write_bytes(Path(tiny["checkpoint"]).read_bytes())
    other = write_tiny_clip(tmp_path / "other", seed=1)
    sha, other_sha = (hashlib.sha256(Path(e["checkpoint"]).read_bytes()).hexdigest() for e in (tiny, other))
    folder = weights_folder(spec_of(tiny), res)
    assert folder == f"{res}/weights/open_clip/{ARCH}.{sha}"
    assert weights_folder(spec_of({**tiny, "checkpoint": str(copy)}), res) == folder
    assert head_name(spec_of({**tiny, "checkpoint": str(copy)}), res) == head_name(spec_of(tiny), res)
    assert weights_folder(spec_of(other), res) == f"{res}/weights/open_clip/{ARCH}.{other_sha}"
    assert head_name(spec_of(other), res) != head_name(spec_of(tiny), res)
    replaced = spec_of({**tiny, "checkpoint": str(copy)})
    os.replace(other["checkpoint"], copy)
    assert weights_folder(replaced, res) == f"{res}/weights/open_clip/{ARCH}.{other_sha}"
    with pytest.raises(ConfigError, match=r"models.tiny.checkpoint: .*gone.safetensors is not a file"):
        weights_folder(spec_of({**tiny, "checkpoint": str(tmp_path / "gone.safetensors")}), res)
    # the fetch_weights job refuses a file replaced since the workflow was planned (its folder named the old one)
    with pytest.raises(ValueError, match=rf"copy.safetensors changed since the workflow was planned .*{other_sha}"):
        fetch_weights(replaced, Path(folder), res)
    assert not Path(folder).exists()
    fetch_weights(replaced, Path(weights_folder(replaced, res)), res)
    assert [p.name for p in Path(weights_folder(replaced, res)).iterdir()] == [f"{other_sha}.safetensors"]


def test_the_checkpoint_key_is_a_local_file_for_open_clip(tiny, tmp_path):
    """``checkpoint`` is the key the checkpoint source reads too: ``{path}`` is the same file as a bare path, and a
    URL is refused, since an open_clip ``weights`` is a name, not a sha256 that a download could be checked against."""
    res = str(tmp_path / "res")
    given_as_path = spec_of({**tiny, "checkpoint": {"path": tiny["checkpoint"]}})
    assert head_name(given_as_path, res) == head_name(spec_of(tiny), res)
    with pytest.raises(ConfigError, match="models.tiny.checkpoint: an open_clip checkpoint must be a local file"):
        head_name(spec_of({**tiny, "checkpoint": {"url": "https://example.org/tiny.safetensors"}}), res)


def test_memo_and_the_baseline_run_an_open_clip_model_with_its_head(tiny, tiny_weights, tiny_head, tmp_path):
    """The tta job loads an open_clip model with its zero-shot head: the baseline is the zero-shot classifier on
    the standard view (at the model's input size, with the tag's normalisation), and MEMO's predictions stay in
    the class subset."""
    rng = np.random.default_rng(3)
    records = []
    for k in range(2):
        path = tmp_path / f"img{k}.png"
        Image.fromarray(rng.integers(0, 256, (48, 40, 3), dtype=np.uint8)).save(path)
        records.append(Record(f"img{k}", str(path), [k], ["x"], 40, 48))
    spec, subset = spec_of(tiny), [5, 17, 300]
    meta = run_tta_to_file(
        tmp_path / "none.parquet",
        records,
        spec,
        "none",
        "toy",
        class_indices=subset,
        threads=1,
        weights=tiny_weights,
        head=tiny_head,
    )
    loaded = load_model(spec, tiny_weights, tiny_head)
    mean, std = (torch.tensor(v).view(3, 1, 1) for v in (loaded.mean, loaded.std))
    x = torch.stack([(standard_view(Image.open(r.path).convert("RGB"), 32) - mean) / std for r in records])
    with torch.no_grad():
        logits = loaded.module(x)
    table = pq.read_table(tmp_path / "none.parquet").to_pydict()
    assert table["pred"] == [subset[i] for i in logits[:, subset].argmax(dim=1).tolist()]
    assert table["pred_full"] == logits.argmax(dim=1).tolist()
    assert meta["model"]["zero_shot"]["weights_sha256"] == loaded.weights_sha256
    run_tta_to_file(
        tmp_path / "rrc.parquet",
        records,
        spec,
        "memo_rrc",
        "toy",
        MemoSettings(views=2),
        class_indices=subset,
        threads=1,
        weights=tiny_weights,
        head=tiny_head,
    )
    assert set(pq.read_table(tmp_path / "rrc.parquet").column("pred").to_pylist()) <= set(subset)
