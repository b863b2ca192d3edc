"""Config validation as the Snakefile runs it (``zoomeval.registries.load_config``), without Snakemake's DAG, and
the typed config it returns."""

from __future__ import annotations

import ast
import copy
import inspect
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import MISSING, asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from snakemake.utils import update_config

from tests.conftest import ROOT
from tests.test_docs import docs
from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.core import devices
from zoomeval.core.config import (
    BrowserConfig,
    Config,
    ConfigError,
    CountFilter,
    DatasetConfig,
    InferenceSettings,
    InputSpec,
    MemoSettings,
    ModelSpec,
    PoliciesConfig,
    SamConfig,
    StatsConfig,
    TTAConfig,
    WhereZoomConfig,
)
from zoomeval.core.config_schema import key_schema
from zoomeval.core.devices import check_device, claims_gpu, gpu_slot, gpus_at_most, resolve_device
from zoomeval.core.layout import Layout
from zoomeval.datasets.registry import ADAPTERS
from zoomeval.inference.models import MODEL_SOURCES
from zoomeval.inference.sources.checkpoint import CheckpointOptions
from zoomeval.inference.sources.open_clip_models import OpenClipOptions
from zoomeval.inference.sources.timm_models import TimmOptions
from zoomeval.masks.sam import MODEL_TYPES
from zoomeval.registries import checked_config, load_config

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
VAL = {"adapter": "imagenet_val", "images": "/data/val.tar", "annotations": "/data/bbox.tgz"}


def validated(change=lambda c: None, check_paths: bool = False) -> Config:
    config = copy.deepcopy(DEMO)
    change(config)
    return load_config(config, check_paths=check_paths)


def refusal(change) -> str:
    with pytest.raises(ConfigError) as info:
        validated(change)
    return str(info.value)


SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', flags=re.M)  # a file the docs site includes (pymdownx.snippets)


def yaml_blocks(markdown: Path) -> list[str]:
    """The YAML blocks of a Markdown page as the built site shows them (included files in place)."""
    blocks = re.findall(r"^```ya?ml\n(.*?)^```", markdown.read_text(), flags=re.M | re.S)
    return [SNIPPET.sub(lambda m: (ROOT / m[1]).read_text().rstrip("\n"), block) for block in blocks]


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def as_config(block: dict[str, Any]) -> dict[str, Any]:
    """A YAML block of the docs as a whole config: a fragment (no ``scales``, e.g. one ``models`` section) replaces
    those sections of the demo config."""
    return block if "scales" in block else {**copy.deepcopy(DEMO), **block}


def test_the_docs_example_configs_and_the_shipped_configs_validate() -> None:
    """Every YAML block of README.md and the docs site, and config/*.yaml, through the Snakefile's validation;
    local paths need not exist (``check_paths=False``: /data/... stands for the reader's own copies)."""
    blocks = {
        f"{page.relative_to(ROOT)} block {k}": text for page in doc_pages() for k, text in enumerate(yaml_blocks(page))
    }
    assert len([name for name in blocks if name.startswith("docs/how-to/")]) >= 5
    for name, text in blocks.items():
        config = yaml.safe_load(text)
        assert isinstance(config, dict), name
        try:
            load_config(as_config(config), check_paths=False)
        except ConfigError as error:
            raise AssertionError(f"{name}: {error}") from None
    typed = [
        load_config(yaml.safe_load(path.read_text()), check_paths=False)
        for path in sorted((ROOT / "config").glob("*.yaml"))
    ]
    assert len(typed) >= 6


def test_each_how_to_recipe_shows_a_config_file_that_is_validated() -> None:
    """The recipes print their configs from files under config/ (so the file the reader runs is the one tested;
    tests/test_docs.py checks that the copies in the pages are the files)."""
    pages = [page.read_text() for page in (ROOT / "docs" / "how-to").glob("*.md")]
    included = {m["path"] for text in pages for m in docs.INCLUDE.finditer(text)}  # copied in, checked for staleness
    assert {"config/imagenet_val.yaml", "config/imagefolder.yaml"} <= included
    assert all((ROOT / path).is_file() for path in included)
    recipe = load_config(yaml.safe_load((ROOT / "config" / "imagefolder.yaml").read_text()), check_paths=False)
    assert recipe.datasets["own_data"].count_method is None  # not in stats.pairs: no objects counted
    assert "config/overlays/gpu.yaml" in included  # the recipe's inference settings: one file for every config
    recipe = yaml.safe_load((ROOT / "config" / "imagenet_val.yaml").read_text())
    update_config(recipe, yaml.safe_load((ROOT / "config" / "overlays" / "gpu.yaml").read_text()))
    gpu = load_config(recipe, check_paths=False)
    # the settings bench/gpu_check.sh measured (auto: the device path on CUDA), which the expected time comes from
    assert (gpu.inference.resize_backend, gpu.inference.precision, gpu.inference.compile) == ("auto", "bf16", True)
    assert gpu.inference.batch_size == 9 * len(gpu.scales) + 9


def test_count_method_is_defaulted_and_checked_only_for_datasets_in_stats_pairs() -> None:
    folder = {"adapter": "imagefolder", "root": "/data/a", "variants": ["original"]}

    def without_sam(pairs):
        return lambda c: (c.pop("sam"), c["datasets"].update(a=folder), c.update(stats={"pairs": pairs}))

    config = validated(without_sam([]))
    assert config.datasets["a"].count_method is None
    assert config.datasets["demo"].count_method is None  # config.yaml gives it, but demo is in no pair here
    message = refusal(without_sam([["demo", "a"]]))  # SAM would count a's objects
    assert message.startswith("datasets.a: SAM masks or counts need a top-level sam section")
    config = validated(lambda c: (c["datasets"].update(a=folder), c.update(stats={"pairs": [["demo", "a"]]})))
    assert config.datasets["a"].count_method == "sam_auto"
    boxless_count = {**folder, "count_method": "bbox"}
    validated(lambda c: c["datasets"].update(a=boxless_count))  # unused: a is in no pair
    message = refusal(lambda c: (c["datasets"].update(a=boxless_count), c.update(stats={"pairs": [["a", "demo"]]})))
    assert message.startswith("datasets.a.count_method: adapter 'imagefolder' has no boxes to count; use sam_auto")


@pytest.mark.parametrize(
    ("datasets", "message"),
    [
        (
            {"v": {**VAL, "label_sets": ["in", "real"]}, "v_real": {"adapter": "demo"}},
            "datasets.v_real (dataset 'v_real') collides with datasets.v.label_sets[1] (its real scoring, named "
            "'v_real')",
        ),
        (  # the same the other way round: the scoring comes second
            {"v_real": {"adapter": "demo"}, "v": {**VAL, "label_sets": ["real"]}},
            "datasets.v.label_sets[0] (its real scoring, named 'v_real') collides with datasets.v_real",
        ),
        (  # v_in's ReaL scoring and v's IN+ReaL scoring are both v_in_real
            {"v": {**VAL, "label_sets": ["in_real"]}, "v_in": {**VAL, "label_sets": ["real"]}},
            "datasets.v_in.label_sets[0] (its real scoring, named 'v_in_real') collides with "
            "datasets.v.label_sets[0] (its in_real scoring, named 'v_in_real')",
        ),
        (
            {"demo": {"adapter": "demo"}, "Demo": {"adapter": "demo"}},
            "datasets.Demo (dataset 'Demo') collides with datasets.demo (dataset 'demo') in all but case",
        ),
    ],
    ids=["dataset-after-scoring", "scoring-after-dataset", "two-scorings", "case"],
)
def test_dataset_and_scoring_names_that_collide_are_refused_naming_both_keys(datasets, message) -> None:
    assert refusal(lambda c: c.update(datasets=datasets, stats={"pairs": []})).startswith(message)


def test_dataset_names_and_scorings_that_do_not_collide_are_accepted() -> None:
    v = {**VAL, "label_sets": ["in", "real", "in_real"]}
    config = validated(lambda c: c["datasets"].update(v=v, w_real={"adapter": "demo"}, _x={"adapter": "demo"}))
    assert list(config.datasets) == ["demo", "demo_clutter", "v", "w_real", "_x"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("..", "models: '..' is not a valid name: a model name"),
        (".hidden", "models: '.hidden' is not a valid name: a model name"),
        ("-r", "models: '-r' is not a valid name: a model name"),
        ("a/b", "models: 'a/b' is not a valid name: a model name"),
        (
            "efficientnet_lite0.aggregates",
            "models.efficientnet_lite0.aggregates: a model name cannot end in "
            ".aggregates: its predictions would be the aggregates file of a model 'efficientnet_lite0'",
        ),
        (
            "efficientnet_lite0.part12",
            "models.efficientnet_lite0.part12: a model name cannot end in .part12: with "
            "inference.parts its predictions would be a part file of a model 'efficientnet_lite0'",
        ),
        (
            "EfficientNet_Lite0",
            "models.EfficientNet_Lite0 (model 'EfficientNet_Lite0') collides with "
            "models.efficientnet_lite0 (model 'efficientnet_lite0') in all but case",
        ),
    ],
)
def test_model_names_that_escape_or_collide_are_refused(name: str, message: str) -> None:
    assert refusal(lambda c: c["models"].update({name: c["models"]["efficientnet_lite0"]})).startswith(message)


@pytest.mark.parametrize("name", ["..", "a/b", ".x", "-x", "a.b"])
def test_dataset_names_that_are_not_plain_folder_names_are_refused(name: str) -> None:
    message = refusal(lambda c: c["datasets"].update({name: {"adapter": "demo"}}))
    assert message.startswith(f"datasets: {name!r} is not a valid name: a dataset name: letters, digits, _ and -, not ")


#: Names one character away from a valid one: a trailing newline (which `$` alone lets through), carriage return,
#: tab, a space, control characters, look-alike letters (Cyrillic е, fullwidth ｄ) and a line separator.
NEAR_NAMES = [
    "demo\n",
    "demo\r",
    "demo\r\n",
    "de\tmo",
    "demo ",
    " demo",
    "demo\x00",
    "demo\x1b[2J",
    "demo\x7f",
    "demo\x85",
    "d\u0435mo",
    "\uff44emo",
    "demo\u2028",
    "\ndemo",
]


@pytest.mark.parametrize("name", NEAR_NAMES)
def test_names_with_a_trailing_newline_tab_control_or_look_alike_are_refused_everywhere(name: str) -> None:
    """The one name rule: the schema's model and dataset names, and the layout's wildcard values (what an index or
    a target path is parsed by), match whole or not at all."""
    model = refusal(lambda c: c["models"].update({name: c["models"].pop("efficientnet_lite0")}))
    assert model.startswith(f"models: {name!r} is not a valid name: a model name"), model
    dataset = refusal(lambda c: c["datasets"].update({name: c["datasets"].pop("demo")}))
    assert dataset.startswith(f"datasets: {name!r} is not a valid name: a dataset name"), dataset
    variant = name.replace("demo", "fgset")  # an enum, compared whole
    refused_variant = refusal(lambda c: c["datasets"]["demo"].update({"variants": ["original", variant]}))
    assert refused_variant.startswith(f"datasets.demo.variants[1]: {variant!r} is not one of"), refused_variant
    layout = Layout()
    assert layout.parse("metrics", layout.path("metrics", scored="demo", variant="original", model="m")) is not None
    control = any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch == "\u2028" for ch in name)
    for wildcards in (
        {"scored": name, "variant": "original", "model": "m"},
        {"scored": "demo", "variant": "original", "model": name},
    ):
        parsed = layout.parse("metrics", layout.path("metrics", **wildcards))
        assert (parsed is None) == control, (name, parsed)  # look-alikes are file names; the config refuses them


#: The longest file name derived from a model name: an atomic write (zoomeval.core.io) of a part's aggregates.
LONGEST_DERIVED = ".{name}.part{part}.aggregates.parquet.0123456789abcdef.tmp"


def test_names_are_bounded_so_that_every_file_named_after_them_fits(tmp_path: Path) -> None:
    longest = "m" * 199 + "n"
    assert list(validated(lambda c: c["models"].update({longest: c["models"].pop("efficientnet_lite0")})).models) == [
        longest
    ]
    (tmp_path / LONGEST_DERIVED.format(name=longest, part=999_999_999)).touch()  # 255 bytes: the file system's limit
    too_long = "m" * 240  # passed before, then predict died with OSError: [Errno 36] File name too long
    message = refusal(lambda c: c["models"].update({too_long: c["models"].pop("efficientnet_lite0")}))
    assert message.startswith(f"models: '{'m' * 40}'... (240 characters) is not a valid name: a model name: ")
    assert "at most 200 characters" in message
    message = refusal(lambda c: c["datasets"].update({"d" * 201: c["datasets"].pop("demo")}))
    assert message.startswith(f"datasets: '{'d' * 40}'... (201 characters) is not a valid name")
    assert "at most 200" in message


def test_names_snakemake_would_take_for_a_recursion_are_refused_exactly_where_it_does() -> None:
    """Brute force against Snakemake's own detector over names ending in 1 to 3 letter pieces repeated 15 to 25
    times: the schema refuses a name exactly when Snakemake would raise PeriodicWildcardError on it."""
    from snakemake.io import PeriodicityDetector

    detector = PeriodicityDetector()
    pattern = re.compile(yaml.safe_load(SCHEMA.read_text())["properties"]["models"]["propertyNames"]["pattern"])
    names = [
        f"{head}{piece * n}"
        for head in ("", "r", "resnet_", "ab")
        for piece in ("a", "ab", "abc", "aab", "1")
        for n in range(15, 26)
    ]
    refused = [name for name in names if not pattern.search(name)]
    assert refused == [name for name in names if detector.is_periodic(name) is not None]
    assert "a" * 20 in refused and "a" * 19 not in refused and "resnet_" + "ab" * 20 in refused
    message = refusal(lambda c: c["models"].update({"a" * 20: c["models"].pop("efficientnet_lite0")}))
    assert message.startswith(f"models: '{'a' * 20}' is not a valid name") and "repeated 20 times" in message


def test_every_missing_input_and_unusable_setting_is_listed_at_once(tmp_path: Path, monkeypatch) -> None:
    """Before: one refusal per run, the first missing file only (fixing `images` revealed `annotations`)."""

    def change(c):
        c["datasets"]["val"] = {**VAL, "variants": ["original"], "label_sets": ["in", "multilabel"]}
        c["models"]["ckpt"] = {
            "source": "checkpoint",
            "architecture": "resnet50",
            "weights": "a" * 64,
            "checkpoint": str(tmp_path / "r50.pth"),
        }
        c["inference"]["device"] = "cuda:7"
        c["tta"]["models"] = ["nope"]
        c["multilabel"] = str(tmp_path / "human.json")

    config = copy.deepcopy(DEMO)
    change(config)
    monkeypatch.setattr(devices, "gpus_at_most", lambda: 1)
    with pytest.raises(ConfigError) as info:
        load_config(config)
    missing = "does not exist; download it and point the key at it, or give a url"
    assert str(info.value).splitlines() == [
        f"multilabel: '{tmp_path / 'human.json'}' {missing}",
        "inference.device: 'cuda:7' does not exist here, 1 CUDA device visible; use auto, cpu, cuda:0",
        "tta.models: 'nope' is not in this config's models; use one of ['efficientnet_lite0', 'ckpt']",
        f"datasets.val.images: '/data/val.tar' {missing}",
        f"datasets.val.annotations: '/data/bbox.tgz' {missing}",
        f"models.ckpt.checkpoint: '{tmp_path / 'r50.pth'}' {missing}",
    ]


def test_model_names_with_inner_dots_still_work() -> None:
    config = validated(lambda c: c["models"].update({"resnet50.tv_in1k": c["models"].pop("efficientnet_lite0")}))
    assert list(config.models) == ["resnet50.tv_in1k"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(mean=[float("nan")] * 3), "models.efficientnet_lite0.mean[0]: nan is not a finite number"),
        (lambda m: m.update(std=[0.2, float("inf"), 0.2]), "models.efficientnet_lite0.std[1]: inf is not a finite"),
        (lambda m: m.update(std=[0.2, 0.0, 0.2]), "models.efficientnet_lite0.std[1]: 0.0 is less than or equal to"),
        (
            lambda m: m.update(mean=[123.7, 116.3, 103.5]),
            "models.efficientnet_lite0.mean[0]: 123.7 is greater than "
            "the maximum of 1 (a channel mean of pixels in [0, 1]; divide a 0-255 scale value by 255)",
        ),
        (
            lambda m: m.update(input_size=100000),
            "models.efficientnet_lite0.input_size: 100000 is greater than the maximum of 1024",
        ),
    ],
    ids=["nan-mean", "inf-std", "zero-std", "mean-0-255", "input-size"],
)
def test_normalisation_and_crop_size_out_of_range_are_refused_naming_the_key(change, message: str) -> None:
    assert refusal(lambda c: change(c["models"]["efficientnet_lite0"])).startswith(message)


def test_a_checkpoint_on_a_model_source_that_never_reads_it_is_refused() -> None:
    """Otherwise an embedded or torchvision model would run with its published weights while the config names a
    checkpoint."""
    message = refusal(lambda c: c["models"]["efficientnet_lite0"].update(checkpoint="/data/mine.pth"))
    assert message == (
        "models.efficientnet_lite0.checkpoint: only sources checkpoint, entry_point, open_clip, timm "
        "read it; remove it from this embedded model"
    )


def test_nan_counting_thresholds_and_time_limits_are_refused() -> None:
    assert refusal(lambda c: c["sam"]["counting"].update(min_iou=float("nan"))).startswith(
        "sam.counting.min_iou: nan is not a finite number; give a finite value"
    )
    assert refusal(lambda c: c.update(cover_time_limit="nan")).startswith("cover_time_limit: nan is not a finite")


def test_the_schema_alone_refuses_nan_means_and_stds() -> None:
    """Tools that validate with the schema but not the package (editors, jsonschema) see NaN refused too."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(yaml.safe_load(SCHEMA.read_text()))
    config = copy.deepcopy(DEMO)
    assert validator.is_valid(config)
    for key in ("mean", "std"):
        config["models"]["efficientnet_lite0"][key] = [0.5, float("nan"), 0.5]
        assert not validator.is_valid(config), key
        config["models"]["efficientnet_lite0"][key] = [0.5, 0.5, 0.5]
    assert validator.is_valid(config)


def test_numbers_given_as_strings_or_integral_floats_are_normalised() -> None:
    """``--config scales=[224,256]`` passes the items as strings; YAML may write 224.0."""
    inference = {"batch_size": "32", "compile": "false", "store_top5": "True"}
    config = validated(
        lambda c: c.update(
            scales=["224", 256.0, " 64 "], top_k="3", cover_time_limit="2.5", cover_node_limit="50", inference=inference
        )
    )
    assert config.scales == (224, 256, 64) and all(type(s) is int for s in config.scales)
    assert (config.top_k, config.cover_time_limit, config.cover_node_limit) == (3, 2.5, 50)
    assert config.inference.batch_size == 32 and config.inference.compile is False
    assert config.inference.store_top5 is True
    assert refusal(lambda c: c.update(scales=[224.5])).startswith("scales[0]: 224.5 is not of type 'integer'")
    assert refusal(lambda c: c.update(top_k="many")).startswith("top_k: 'many' is not of type 'integer'")
    assert refusal(lambda c: c.update(cover_node_limit=0)).startswith("cover_node_limit: 0 is less than the minimum")


def test_upper_case_checksums_are_lower_cased_and_bad_ones_named() -> None:
    digest = "AB12" * 16
    x = {"adapter": "imagefolder", "root": {"path": "/data/x", "sha256": digest}, "variants": ["original"]}
    config = validated(lambda c: c["datasets"].update(x=x))
    assert config.datasets["x"].inputs["root"].sha256 == digest.lower()
    config = validated(lambda c: c["sam"].update(checkpoint={"url": "https://x/sam.pth", "sha256": digest}))
    assert config.sam.checkpoint.sha256 == digest.lower()
    message = refusal(lambda c: c["sam"].update(checkpoint={"url": "https://x/sam.pth", "sha256": "abc"}))
    assert message.startswith("sam.checkpoint.sha256: 'abc' does not match '^[0-9a-f]{64}$(?!\\\\n)'")
    message = refusal(lambda c: c["sam"].update(checkpoint={"url": "https://x/sam.pth", "sha": "abc"}))
    assert message == (
        "sam.checkpoint: Additional properties are not allowed ('sha' was unexpected); the keys allowed here are "
        "url, sha256"
    )
    message = refusal(lambda c: c["sam"].update(checkpoint={"file": "sam.pth"}))
    assert message == (
        "sam.checkpoint: {'file': 'sam.pth'} is not valid under any of the given schemas (a path string, or a "
        "mapping {path, sha256}, {url, sha256} or {hf, pattern, revision})"
    )


def test_unknown_keys_are_named_with_the_keys_allowed() -> None:
    assert refusal(lambda c: c.update(scale=[1])).startswith(
        "the config: Additional properties are not allowed ('scale' was unexpected); the keys allowed here are "
        "scales, top_k, on_bad_image, max_resized_pixels, cover_node_limit, cover_time_limit, limit, resources, "
        "datasets, models, sam, stats, inference, browser, multilabel"
    )


def test_the_browser_section_keeps_the_keys_it_gives_and_refuses_bad_ones_naming_them() -> None:
    config = validated(lambda c: c.update(browser={"page_size": 7}))
    assert config.browser == BrowserConfig(page_size=7) and config.browser.max_images == 2000
    assert refusal(lambda c: c.update(browser={"page_size": 0})).startswith("browser.page_size: 0 is less than")
    assert "'max_image' was unexpected" in refusal(lambda c: c.update(browser={"max_image": 10}))


def test_local_paths_are_checked_unless_check_paths_is_off(tmp_path: Path) -> None:
    def mine(root):
        return lambda c: c["datasets"].update(mine={"adapter": "imagefolder", "root": root, "variants": ["original"]})

    with pytest.raises(ConfigError, match=r"^datasets.mine.root: '/nonexistent' does not exist"):
        validated(mine("/nonexistent"), check_paths=True)
    validated(mine("/nonexistent"), check_paths=False)
    validated(mine(str(tmp_path)), check_paths=True)


@pytest.fixture
def gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The driver's GPU list with ``n`` entries (None: no NVIDIA driver), and CUDA_VISIBLE_DEVICES unset."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def make(n: int | None) -> None:
        monkeypatch.setattr(devices, "NVIDIA_GPUS", tmp_path / "gpus")
        if n is not None:
            (tmp_path / "gpus").mkdir()
            for i in range(n):
                (tmp_path / "gpus" / f"0000:{i:02x}:00.0").mkdir()

    return make


def test_visible_gpus_are_bounded_by_the_driver_and_cuda_visible_devices(gpus, monkeypatch) -> None:
    gpus(None)
    assert gpus_at_most() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus_at_most() == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert gpus_at_most() == 2
    gpus(4)
    assert gpus_at_most() == 2
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus_at_most() == 4


def test_a_cuda_index_beyond_the_machines_gpus_is_refused_at_config_time(gpus) -> None:
    gpus(2)
    check_device("inference.device", "cuda:1")
    check_device("inference.device", "cuda")
    check_device("inference.device", "cpu")
    with pytest.raises(ConfigError) as info:
        check_device("inference.device", "cuda:2")
    assert (
        str(info.value)
        == "inference.device: 'cuda:2' does not exist here, 2 CUDA devices visible; use auto, cpu, cuda:0 to cuda:1"
    )
    message = refusal(lambda c: c["sam"].update(device="cuda:99"))
    assert message.startswith("sam.device: 'cuda:99' does not exist here, 2 CUDA devices visible")


def test_cuda_indices_pass_where_the_gpus_are_unknown(gpus) -> None:
    gpus(None)  # e.g. a cluster's login node: the job checks again when it starts
    check_device("sam.device", "cuda:7")


def test_a_job_refuses_a_cuda_device_torch_cannot_see_naming_the_key() -> None:
    missing = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(ConfigError, match=rf"^sam.device: '{missing}' is not available, \d+ CUDA devices? visible"):
        resolve_device(missing, "sam.device")
    assert resolve_device("cpu", "sam.device") == torch.device("cpu")
    assert resolve_device("auto", "sam.device").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_auto_claims_a_gpu_where_the_driver_lists_one_visible_gpu(gpus, monkeypatch) -> None:
    gpus(None)
    assert not claims_gpu("auto") and claims_gpu("cuda:1") and not claims_gpu("cpu")
    gpus(2)
    assert claims_gpu("auto")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not claims_gpu("auto")


HOLD_GPU = """
import sys
from pathlib import Path
from zoomeval.core.devices import gpu_slot
with gpu_slot("auto", int(sys.argv[1]), Path(sys.argv[2])) as device:
    print(device, flush=True)
    sys.stdin.read()  # hold it until the parent closes stdin
"""


def test_parallel_gpu_jobs_of_one_machine_each_take_a_free_gpu(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    folder = tmp_path / "locks"
    with gpu_slot("auto", 1, folder) as device:  # one GPU (or a SLURM job's own): nothing to choose
        assert device == "auto" and not folder.exists()
    for fixed in ("cpu", "cuda:1"):
        with gpu_slot(fixed, 3, folder) as device:
            assert device == fixed
    cmd = [sys.executable, "-c", HOLD_GPU, "3", str(folder)]
    other = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "cuda:0"  # another job holds GPU 0
        with gpu_slot("auto", 3, folder) as first, gpu_slot("cuda", 3, folder) as second:
            assert (first, second) == ("cuda:1", "cuda:2")
            with pytest.raises(RuntimeError, match="all 3 GPUs are held by other zoomeval jobs"):
                gpu_slot("auto", 3, folder).__enter__()
        with gpu_slot("auto", 3, folder) as device:  # released when the block ends
            assert device == "cuda:1"
    finally:
        other.stdin.close()
        other.wait(timeout=30)
    with gpu_slot("auto", 3, folder) as device:  # and when the process that held it ends
        assert device == "cuda:0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")  # locks name the devices as the machine numbers them
    with gpu_slot("auto", 2, folder) as device:
        assert device == "cuda:0" and (folder / "5.lock").exists()


def test_a_minimal_config_takes_every_default_from_the_dataclasses() -> None:
    config = load_config(
        {
            "scales": [256],
            "datasets": {"v": VAL, "d": {"adapter": "demo"}},
            "models": {"m": DEMO["models"]["efficientnet_lite0"]},
        },
        check_paths=False,
    )
    assert (config.top_k, config.on_bad_image, config.max_resized_pixels, config.cover_time_limit) == (
        36,
        "skip",
        2**24,
        1800,
    )
    assert config.cover_node_limit == 1000 and type(config.cover_time_limit) is float  # the schema's type: number
    assert (config.tta.prior_strength, config.tta.momentum, config.policies.transfer) == (16.0, 0.0, ())
    assert type(config.tta.prior_strength) is float and config.tta.paper_models == {} and config.sam is None
    assert config.resources == "resources" and config.sam is None and config.stats.pairs == ()
    assert config.inference == InferenceSettings()
    assert (config.inference.batch_size, config.inference.shard_images, config.inference.parts) == (64, 500, 1)
    assert config.browser == BrowserConfig() and (2000, 160, 24, 3) == (
        config.browser.max_images,
        config.browser.thumbnail_size,
        config.browser.page_size,
        config.browser.predictions_shown,
    )
    v, d = config.datasets["v"], config.datasets["d"]
    assert v.variants == d.variants == ("original", "fgset", "bgset")  # both adapters give boxes
    assert (v.class_set, v.mask_method, v.label_sets) == ("full", "bbox", ("in",))
    assert v.count_method is None and v.password is None
    assert d.scenes == "standard" and config.models["m"].input_size == 224 and config.models["m"].mean is None
    objectnet = {**DEMO, "datasets": {"o": {"adapter": "objectnet", "root": "/o"}}, "stats": {}}
    objectnet = load_config(objectnet, check_paths=False)
    assert objectnet.datasets["o"].variants == ("original",)
    assert objectnet.datasets["o"].password == "objectnetisatestset"  # the adapter's published password


def plain(value: Any) -> Any:
    """A dataclass default as the schema writes it: tuples as lists, typed sections and inputs as mappings."""
    if is_dataclass(value):
        return value.to_config() if isinstance(value, InputSpec) else plain(asdict(value))
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return {k: plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def field_defaults(cls: type) -> dict[str, Any]:
    values = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    values |= {f.name: f.default_factory() for f in fields(cls) if f.default_factory is not MISSING}
    return {k: plain(v) for k, v in values.items()}


#: Each typed section and the schema of its keys (``*``: a dataset's or model's entry).
TYPED_SECTIONS = [
    ((), (Config,)),
    (("inference",), (InferenceSettings,)),
    (("browser",), (BrowserConfig,)),
    (("tta",), (MemoSettings, TTAConfig)),
    (("policies",), (PoliciesConfig,)),
    (("sam",), (SamConfig,)),
    (("sam", "counting"), (CountFilter,)),
    (("stats",), (StatsConfig,)),
    (("where_zoom_helps",), (WhereZoomConfig,)),
    (("datasets", "*"), (DatasetConfig,)),
    (("models", "*"), (ModelSpec, OpenClipOptions, TimmOptions, CheckpointOptions)),  # an entry's keys, its source's
]
#: Fields that are no key of their section: an entry's name (its key under datasets or models), a dataset's inputs
#: (keys its adapter declares) and a model's source options (the keys only its source reads, typed by the source).
NOT_KEYS = {"name", "inputs", "options"}


@pytest.mark.parametrize(("section", "classes"), TYPED_SECTIONS)
def test_the_dataclasses_apply_the_schema_defaults(section, classes) -> None:
    """The schema's ``default`` of each key is the default of its dataclass field, and a field with a default other
    than None has one in the schema or an ``x-default`` saying why not."""
    properties = key_schema(*section)["properties"]
    applied = {k: v for c in classes for k, v in field_defaults(c).items()}
    declared = {k: v["default"] for k, v in properties.items() if "default" in v}
    assert {k: applied[k] for k in declared if k in applied} == declared
    assert set(declared) <= set(applied)
    # a section's defaults are its keys'; x-default explains a default that depends on other keys
    explained = {k for k, v in properties.items() if "x-default" in v or "properties" in v}
    assert {k for k in applied if k in properties and applied[k] is not None} <= set(declared) | explained


@pytest.mark.parametrize(("section", "classes"), TYPED_SECTIONS)
def test_each_key_and_default_is_declared_in_the_schema_only(section, classes) -> None:
    """The fields of a typed section are the keys of its schema (a dataset's input keys: its ``inputs``), and the
    class's source gives no default but ``None`` for a key the schema gives no default (the others come from the
    schema: ``config_schema.schema_defaults``), so that a default cannot be declared twice and drift."""
    properties = key_schema(*section)["properties"]
    inputs = {k for k, v in properties.items() if v.get("$ref") == "#/$defs/input" and section == ("datasets", "*")}
    assert set(properties) - inputs == {f.name for cls in classes for f in fields(cls)} - NOT_KEYS
    for cls in classes:
        assert {f.name for f in fields(cls) if f.name in vars(cls).get("__annotations__", {})} - NOT_KEYS <= set(
            properties
        ), cls
        (body,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
        for statement in body.body:
            if not isinstance(statement, ast.AnnAssign) or statement.value is None:
                continue
            name, value = statement.target.id, statement.value
            if name in NOT_KEYS:
                continue
            keyword_only = isinstance(value, ast.Call) and [k.arg for k in value.keywords] == ["kw_only"]
            assert keyword_only or (isinstance(value, ast.Constant) and value.value is None), f"{cls.__name__}.{name}"
            assert "default" not in properties[name], f"{cls.__name__}.{name}"


def test_the_schema_defaults_are_typed_as_the_validator_types_a_given_value() -> None:
    """A number key's integral default is a float, a list a tuple, a mapping a fresh one per instance: the typed
    config of a key left out equals that of the key given its default (rule params compare reprs)."""
    tta = {"prior_strength": 16, "lr": 0.00025, "momentum": 0, "paper_models": {}}
    defaults = {"cover_time_limit": 1800, "tta": tta, "policies": {"budgets": [1, 2, 4, 9, 18, 36, 72, 144, 324]}}
    given = load_config({**copy.deepcopy(DEMO), **defaults}, check_paths=False)
    left_out = load_config({**copy.deepcopy(DEMO), "tta": {}, "policies": {}}, check_paths=False)
    assert repr(given) == repr(left_out)
    assert TTAConfig().paper_models is not TTAConfig().paper_models


def test_the_schema_enums_and_keys_follow_the_registries() -> None:
    """Each adapter, model source and label set is in the schema's enum, with the config keys it declares."""
    schema = yaml.safe_load(SCHEMA.read_text())["properties"]
    dataset = schema["datasets"]["additionalProperties"]["properties"]
    assert sorted(dataset["adapter"]["enum"]) == sorted(ADAPTERS)
    assert dataset["label_sets"]["items"]["enum"] == list(LABEL_SETS)
    for adapter in ADAPTERS.values():
        assert set(adapter.inputs) | set(adapter.options) <= set(dataset), adapter.name
        assert all(dataset[key]["$ref"] == "#/$defs/input" for key in adapter.inputs), adapter.name
    model = schema["models"]["additionalProperties"]["properties"]
    assert sorted(model["source"]["enum"]) == sorted(MODEL_SOURCES)
    for source in MODEL_SOURCES.values():
        assert set(source.required) <= set(model), source.name
        if source.options is not None:  # the keys only this source reads
            assert {f.name for f in fields(source.options)} <= set(model), source.name
    assert schema["sam"]["properties"]["model_type"]["enum"] == list(MODEL_TYPES)


def test_a_missing_input_an_adapter_requires_is_named() -> None:
    message = refusal(lambda c: c["datasets"].update(v={"adapter": "imagenet_val", "images": "/v"}))
    assert message.startswith("datasets.v.annotations is required for adapter imagenet_val")
    folder = {"adapter": "imagefolder", "root": "/f", "label_sets": ["real"]}
    message = refusal(lambda c: c["datasets"].update(f=folder))
    assert message.startswith(
        "datasets.f.label_sets: 'real' needs ImageNet-ReaL labels, which adapter 'imagefolder' does not provide "
        "(adapters that do: ['imagenet_val'])"
    )


@pytest.mark.parametrize("name", ["sam", "weights", "SAM", "labels"])
def test_dataset_names_that_are_folders_of_the_resources_root_are_refused(name: str) -> None:
    message = refusal(lambda c: c["datasets"].update({name: {"adapter": "demo"}}))
    assert message.startswith(f"datasets.{name}: resources/{name}/ is where the workflow keeps its ")


def test_the_limit_is_a_whole_number_of_images_or_null() -> None:
    assert validated(lambda c: c.update(limit=2)).limit == 2
    assert validated(lambda c: c.update(limit="3")).limit == 3  # as --config limit=3 passes it
    assert validated(lambda c: c.update(limit=None)).limit is None
    assert validated(lambda c: None).limit is None
    assert refusal(lambda c: c.update(limit=0)) == "limit: 0 is less than the minimum of 1"


def test_compile_asked_for_on_the_cpu_is_refused_with_the_fix() -> None:
    message = refusal(lambda c: c["inference"].update(device="cpu", compile=True))
    assert message == (
        "inference.compile: true with inference.device: cpu; torch.compile is used on CUDA only (on a "
        "CPU it needs a C++ toolchain and has crashed jobs): set compile: false, or device: auto to "
        "compile where a GPU is found"
    )
    assert validated(lambda c: c["inference"].update(device="auto", compile=True)).inference.compile


def test_a_plan_notes_compile_off_where_auto_finds_no_gpu(monkeypatch) -> None:
    monkeypatch.setattr(devices, "gpus_at_most", lambda: 0)
    assert devices.cpu_note("auto", True) == (
        "inference.compile: no GPU is visible here, so the jobs run on the CPU with compile turned off"
    )
    assert devices.cpu_note("auto", False) is None and devices.cpu_note("cuda", True) is None
    monkeypatch.setattr(devices, "gpus_at_most", lambda: 1)
    assert devices.cpu_note("auto", True) is None


def test_the_workflows_checks_refuse_top_k_beyond_the_zoom_transforms(tmp_path) -> None:
    """What ``snakemake -n`` and ``zoomeval run``'s preflight check (the demo's model needs no catalogue): 2 scales
    are 18 zoom transforms, so 18 greedy picks fit and 19 are one line naming the key."""
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for top_k, problems in [
        (19, ["top_k: 19 picks from 18 zoom transforms (2 scales x 9 anchors); give top_k <= 18 or more scales"]),
        (18, []),
    ]:
        raw = {**copy.deepcopy(demo), "scales": [224, 256], "top_k": top_k}
        config, found = checked_config(raw, tmp_path / "catalogues", check_paths=False)
        assert (config.top_k, found) == (top_k, problems)


def test_each_config_enum_spelled_in_python_is_the_schemas() -> None:
    """The config values the code names itself (the variants, count methods, SAM methods, zero-shot duplicate
    policies, precisions with an audit tolerance, crop backends, MEMO methods) are the schema's enums, so neither
    can gain a value the other does not know."""
    from zoomeval.analysis.stats import COUNT_METHODS
    from zoomeval.audit.sample import LOGIT_ERROR
    from zoomeval.core.config_schema import key_schema
    from zoomeval.core.zoom import RESIZE_BACKENDS
    from zoomeval.inference.crop_dataset import DEVICE_BACKEND
    from zoomeval.inference.zero_shot import DUPLICATE_POLICIES
    from zoomeval.masks import SAM_METHODS
    from zoomeval.masks.boxes import VARIANTS
    from zoomeval.report.zoom_policies import MEMO_METHODS

    dataset = key_schema("datasets", "*")["properties"]
    assert dataset["variants"]["items"]["enum"] == list(VARIANTS)
    assert dataset["count_method"]["enum"] == list(COUNT_METHODS)
    assert dataset["mask_method"]["enum"] == ["bbox", *SAM_METHODS]
    assert key_schema("models", "*", "duplicate_names")["enum"] == list(DUPLICATE_POLICIES)
    assert sorted(key_schema("inference", "precision")["enum"]) == sorted({p for p, _ in LOGIT_ERROR})
    assert key_schema("inference", "resize_backend")["enum"] == ["auto", *RESIZE_BACKENDS, DEVICE_BACKEND]
    assert key_schema("tta", "methods")["items"]["enum"] == ["none", *MEMO_METHODS]
