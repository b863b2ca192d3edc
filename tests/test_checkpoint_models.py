"""Local weights files: model source ``checkpoint`` (authors' ``.pth.tar`` training checkpoints load with
``weights_only=True``, prefixes stripped, extra fields ignored, sha256 pinned; a pickle that would run code is refused
with nothing executed; a safetensors file; the torchvision preset that evaluates it) and a timm architecture's file
(loaded strictly, evaluated with timm's data config)."""

import copy
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import timm
import torch
import torchvision
from safetensors.torch import load_file, save_file
from torch import nn

from tests.own_models_fixture import TIMM_ARCH, save_weights
from tests.test_config import validated
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.models import (
    IMAGENET_MEAN,
    MODEL_SOURCES,
    LoadedModel,
    check_model,
    fetch_weights,
    load_model,
    weights_folder,
)
from zoomeval.inference.sources.checkpoint import CheckpointOptions
from zoomeval.inference.sources.timm_models import TimmOptions
from zoomeval.inference.standard_eval import eval_transform

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_checkpoint_models")

ARCH = "mobilenet_v3_small"  # a small torchvision architecture with BatchNorm; the paper's is resnet50
FORMATS = {"zip": True, "legacy": False}  # torch >= 1.6 files, and the older format of the 2020-2021 checkpoints


@pytest.fixture(scope="module")
def network() -> nn.Module:
    torch.manual_seed(0)
    return torchvision.models.get_model(ARCH, weights=None)


@pytest.fixture(scope="module")
def checkpoint(network: nn.Module) -> dict[str, object]:
    """What PyTorch's ImageNet example script saves: a DataParallel state dict with the epoch, architecture, best
    accuracy (a tensor) and the optimizer's state (SGD with Nesterov momentum, one step taken)."""
    wrapped = nn.DataParallel(copy.deepcopy(network))
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    wrapped(torch.randn(2, 3, 64, 64)).sum().backward()
    optimizer.step()
    state = {
        "epoch": 180,
        "arch": "resnet50",
        "state_dict": wrapped.state_dict(),
        "best_acc1": torch.tensor(75.8),
        "optimizer": optimizer.state_dict(),
    }
    return state


def save(obj: object, path: Path, fmt: str) -> str:
    torch.save(obj, path, _use_new_zipfile_serialization=FORMATS[fmt])
    return sha256_file(path)


def spec(path: Path | dict[str, str], sha256: str, architecture: str = ARCH) -> ModelSpec:
    where = path if isinstance(path, dict) else str(path)
    return ModelSpec("ckpt", "checkpoint", architecture, sha256, checkpoint=where)


def fetch_and_load(model: ModelSpec, folder: Path) -> LoadedModel:
    """What the workflow does: the fetch_weights job, then a job that loads the fetched weights."""
    fetch_weights(model, folder)
    return load_model(model, folder)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_training_checkpoint_loads_with_module_prefixes_stripped(checkpoint, tmp_path, fmt) -> None:
    assert all(k.startswith("module.") for k in checkpoint["state_dict"])
    path = tmp_path / "deepaugment_and_augmix.pth.tar"
    sha = save(checkpoint, path, fmt)
    loaded = fetch_and_load(spec(path, sha), tmp_path / "weights")
    assert loaded.weights_sha256 == sha and loaded.mean == IMAGENET_MEAN
    assert sha256_file(tmp_path / "weights" / f"{sha}.pth") == sha
    assert not loaded.module.training
    expected = {k.removeprefix("module."): v for k, v in checkpoint["state_dict"].items()}
    got = loaded.module.state_dict()
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[k], expected[k]) for k in expected)


def test_a_bare_state_dict_loads_too(network, tmp_path) -> None:
    path = tmp_path / "weights.pth"
    sha = save(network.state_dict(), path, "zip")
    got = fetch_and_load(spec(path, sha), tmp_path / "weights").module.state_dict()
    assert all(torch.equal(got[k], v) for k, v in network.state_dict().items())


class Payload:
    """Unpickling this object calls ``open(marker, "w")``: it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


class ShellPayload(Payload):
    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("payload", [Payload, ShellPayload])
def test_a_checkpoint_with_a_malicious_pickle_is_refused_and_nothing_runs(checkpoint, tmp_path, fmt, payload) -> None:
    marker = tmp_path / "executed"
    path = tmp_path / "evil.pth.tar"
    sha = save(checkpoint | {"args": payload(marker)}, path, fmt)
    with pytest.raises(ValueError, match=rf"{sha}.pth: refused: .*it needs (io|builtins|posix|os)\.\w+") as info:
        fetch_and_load(spec(path, sha), tmp_path / "weights")
    assert "weights_only=True" in str(info.value)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the payload is live: an unsafe load would have run it
    assert marker.exists()


def test_a_file_that_differs_from_the_pinned_sha256_is_refused_before_it_is_read(checkpoint, tmp_path) -> None:
    path = tmp_path / "moex.pth.tar"
    sha = save(checkpoint, path, "zip")
    with pytest.raises(ValueError, match=f"sha256 {sha} does not match {'0' * 64} \\(pinned in models.ckpt.weights"):
        fetch_weights(spec(path, "0" * 64), tmp_path / "weights")
    assert not any((tmp_path / "weights").iterdir())
    fetch_weights(spec(path, sha), tmp_path / "weights")  # a fetched copy changed afterwards is refused on load
    (tmp_path / "weights" / f"{sha}.pth").unlink()
    (tmp_path / "weights" / f"{sha}.pth").write_bytes(b"replaced")
    with pytest.raises(ValueError, match=f"does not match {sha} \\(pinned in models.ckpt.weights"):
        load_model(spec(path, sha), tmp_path / "weights")


def test_weights_that_do_not_fit_the_architecture_are_refused_naming_keys(network, tmp_path) -> None:
    path = tmp_path / "weights.pth"
    sha = save(network.state_dict(), path, "zip")
    with pytest.raises(ValueError, match=r"do not fit torchvision's resnet18: missing \['conv1.weight'"):
        fetch_and_load(spec(path, sha, architecture="resnet18"), tmp_path / "weights")


def test_a_url_checkpoint_is_downloaded_once_into_the_weights_folder(checkpoint, tmp_path, monkeypatch) -> None:
    served = tmp_path / "served"
    served.mkdir()
    sha = save(checkpoint, served / "uc", "legacy")  # a Google-Drive-like name
    requests: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            requests.append(self.path)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    url = {"url": f"http://127.0.0.1:{httpd.server_address[1]}/uc?id=abc"}
    try:
        for _ in range(2):
            loaded = fetch_and_load(spec(url, sha), tmp_path / "weights")
    finally:
        httpd.shutdown()
    assert loaded.weights_sha256 == sha and sha256_file(tmp_path / "weights" / f"{sha}.pth") == sha
    assert len(requests) == 1  # the second fetch reused the checked file


def test_the_onstart_check_names_the_key_of_a_bad_architecture_or_checksum(network, tmp_path) -> None:
    path = tmp_path / "w.pth.tar"
    sha = save(network.state_dict(), path, "zip")
    check_model(spec(path, sha))
    with pytest.raises(ConfigError, match="models.ckpt.architecture: 'resnet5' is not a torchvision model"):
        check_model(spec(path, sha, architecture="resnet5"))
    with pytest.raises(ConfigError, match=f"w.pth.tar: sha256 {sha} does not match {'1' * 64} \\(pinned in models"):
        check_model(spec(path, "1" * 64))
    # a missing file is the config's path check's (one line, zoomeval.core.validate.missing_inputs), and the fetch's
    check_model(spec(tmp_path / "missing.pth", sha))
    with pytest.raises(FileNotFoundError, match="models.ckpt.checkpoint: .*missing.pth is not a file"):
        fetch_weights(spec(tmp_path / "missing.pth", sha), tmp_path / "weights")


def preset(architecture: str, tag: str | None = None, **keys) -> ModelSpec:
    options = CheckpointOptions(tag)
    return ModelSpec("ckpt", "checkpoint", architecture, "a" * 64, checkpoint="/nowhere.pth", options=options, **keys)


def test_a_checkpoint_is_evaluated_with_the_torchvision_preset_it_names_and_normalised_as_it() -> None:
    """IMAGENET1K_V1 by default: ResNet-50's Resize(256) + CenterCrop(224), ImageNet's mean/std; V2: Resize(232);
    EfficientNet-V2-L's V1: Resize(480, bicubic), [-1, 1]."""
    v1, v2 = eval_transform(preset("resnet50"), None), eval_transform(preset("resnet50", "IMAGENET1K_V2"), None)
    assert v1.crop_settings() == {"img_size": 224, "crop_pct": 0.875, "interpolation": "bilinear"}
    assert v2.crop_settings() == {"img_size": 224, "crop_pct": round(224 / 232, 4), "interpolation": "bilinear"}
    assert (v1.mean, v1.std) == (IMAGENET_MEAN, (0.229, 0.224, 0.225))
    large = eval_transform(preset("efficientnet_v2_l"), None)
    assert (large.crop_settings(), large.mean) == (
        {"img_size": 480, "crop_pct": 1.0, "interpolation": "bicubic"},
        (0.5, 0.5, 0.5),
    )
    check_model(preset("resnet50", mean=IMAGENET_MEAN))  # the preset's own: accepted
    with pytest.raises(
        ConfigError,
        match=r"models.ckpt.mean: \[0.5, 0.5, 0.5\] differs from the \[0.485, 0.456, "
        r"0.406\] of eval_preset IMAGENET1K_V1, which the standard evaluation",
    ):
        check_model(preset("resnet50", mean=(0.5, 0.5, 0.5)))
    with pytest.raises(
        ConfigError,
        match=r"models.ckpt.eval_preset: 'IMAGENET1K_V3' is not a weights tag of "
        r"torchvision's resnet50 \['IMAGENET1K_V1', 'IMAGENET1K_V2'\]",
    ):
        check_model(preset("resnet50", "IMAGENET1K_V3"))
    with pytest.raises(
        ConfigError,
        match=r"'IMAGENET1K_V1' is not a weights tag of torchvision's vit_h_14 "
        r"\['IMAGENET1K_SWAG_E2E_V1', 'IMAGENET1K_SWAG_LINEAR_V1'\]",
    ):
        check_model(preset("vit_h_14"))
    # the entry (a rule param) has the key only where the config gives it: older entries' jobs rerun nothing
    entry = {"source": "checkpoint", "architecture": "resnet50", "checkpoint": "w.pth", "weights": "a" * 64}
    assert "eval_preset" not in ModelSpec.from_config("m", entry, MODEL_SOURCES).entry()
    named = ModelSpec.from_config("m", entry | {"eval_preset": "IMAGENET1K_V2"}, MODEL_SOURCES)
    assert named.entry()["eval_preset"] == "IMAGENET1K_V2"


def test_a_safetensors_checkpoint_is_fetched_under_its_suffix_and_loaded(network, tmp_path) -> None:
    path = tmp_path / "weights.safetensors"
    save_file(network.state_dict(), path)
    sha = sha256_file(path)
    loaded = fetch_and_load(spec(path, sha), tmp_path / "weights")
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == [f"{sha}.safetensors"]
    got = loaded.module.state_dict()
    assert all(torch.equal(got[k], v) for k, v in network.state_dict().items())


def timm_spec(path: Path, sha256: str, architecture: str = TIMM_ARCH, **keys) -> ModelSpec:
    options = TimmOptions(keys.pop("eval_preset", None))
    return ModelSpec("tf", "timm", architecture, sha256, checkpoint=str(path), options=options, **keys)


def test_a_timm_file_loads_into_its_architecture_and_is_evaluated_with_timms_data_config(tmp_path) -> None:
    """As timm's validate.py --model test_efficientnet --checkpoint FILE: crop_pct 0.95 at 160 px, bicubic."""
    path = tmp_path / "tiny.safetensors"
    sha = save_weights(lambda: timm.create_model(TIMM_ARCH), path, seed=2)
    model = timm_spec(path, sha)
    check_model(model)
    assert weights_folder(model, str(tmp_path / "res")) == f"{tmp_path}/res/weights/timm/{TIMM_ARCH}.{sha}"
    loaded = fetch_and_load(model, tmp_path / "weights")
    expected = load_file(path)
    assert all(torch.equal(loaded.module.state_dict()[k], v) for k, v in expected.items())
    assert (loaded.weights_sha256, loaded.mean) == (sha, IMAGENET_MEAN)
    transform = eval_transform(model, loaded.module)
    assert transform.crop_settings() == {"img_size": 160, "crop_pct": 0.95, "interpolation": "bicubic"}
    assert [type(t).__name__ for t in transform.geometry.transforms] == ["Resize", "CenterCrop"]
    assert (transform.geometry.transforms[0].size, transform.geometry.transforms[1].size) == (168, (160, 160))
    other = tmp_path / "other.pth"
    torch.save(timm.create_model("test_resnet").state_dict(), other)
    with pytest.raises(
        ValueError,
        match=f"{sha256_file(other)}.pth: its weights do not fit timm's {TIMM_ARCH}: .*size mismatch for bn1.weight",
    ):
        fetch_and_load(timm_spec(other, sha256_file(other)), tmp_path / "w2")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"architecture": "test_efficientnt"},
            r"models.tf.architecture: 'test_efficientnt' is not a timm "
            r"architecture \(timm.list_models\(\)\); closest: test_efficientnet",
        ),
        (
            {"architecture": "resnet18", "eval_preset": "a1_in1"},
            r"models.tf.eval_preset: 'a1_in1' is not a tag of "
            r"timm's resnet18 \['a1_in1k'",
        ),
        (
            {"architecture": "test_vit"},
            r"models.tf.input_size: test_vit takes 160 px inputs only, not 224; set "
            "input_size: 160",
        ),
        (
            {"std": (0.5, 0.5, 0.5)},
            r"models.tf.std: \[0.5, 0.5, 0.5\] differs from the \[0.229, 0.224, 0.225\] of "
            "timm's data config of test_efficientnet",
        ),
    ],
)
def test_a_timm_file_entry_that_cannot_work_is_refused_naming_the_key(tmp_path, keys, message) -> None:
    with pytest.raises(ConfigError, match=message):
        check_model(timm_spec(tmp_path / "missing.safetensors", "a" * 64, **keys))


def test_the_config_of_a_timm_file_needs_its_sha256_a_local_path_and_the_architecture_alone(tmp_path) -> None:
    entry = {"source": "timm", "architecture": TIMM_ARCH, "checkpoint": str(tmp_path / "w.safetensors")}
    with pytest.raises(ConfigError, match="models.m: 'weights' is a required property"):
        validated(lambda c: c["models"].update(m=entry))
    with pytest.raises(ConfigError, match="models.m.weights: 'r160_in1k' does not match .*the sha256 of the"):
        validated(lambda c: c["models"].update(m=entry | {"weights": "r160_in1k"}))
    entry |= {"weights": "a" * 64}
    assert validated(lambda c: c["models"].update(m=entry)).models["m"].checkpoint == entry["checkpoint"]
    with pytest.raises(
        ConfigError,
        match="models.m.architecture: with a checkpoint give the architecture alone "
        r"\(test_efficientnet\) and the tag whose data config evaluates it as "
        r"eval_preset \(r160_in1k\)",
    ):
        validated(lambda c: c["models"].update(m=entry | {"architecture": f"{TIMM_ARCH}.r160_in1k"}))
    with pytest.raises(ConfigError, match="models.m.checkpoint: a timm checkpoint must be a local file"):
        validated(lambda c: c["models"].update(m=entry | {"checkpoint": {"url": "https://example.org/w.pth"}}))
    with pytest.raises(ConfigError, match="models.m.eval_preset: only a timm model with a checkpoint reads it"):
        validated(
            lambda c: c["models"].update(
                m={"source": "timm", "architecture": "resnet18.a1_in1k", "eval_preset": "a1_in1k"}
            )
        )
    with pytest.raises(
        ConfigError,
        match="models.m.eval_preset: only source checkpoint or timm reads it; remove it from this torchvision model",
    ):
        validated(
            lambda c: c["models"].update(
                m={
                    "source": "torchvision",
                    "architecture": "resnet18",
                    "weights": "IMAGENET1K_V1",
                    "eval_preset": "IMAGENET1K_V1",
                }
            )
        )


def test_the_config_requires_a_checkpoint_and_a_sha256_and_a_local_checkpoint_that_exists(tmp_path) -> None:
    entry = {"source": "checkpoint", "architecture": ARCH, "weights": "a" * 64, "checkpoint": str(tmp_path / "w.pth")}
    config = validated(lambda c: c["models"].update(m=entry))
    assert config.models["m"].checkpoint == str(tmp_path / "w.pth")  # check_paths=False: need not exist yet
    with pytest.raises(ConfigError, match=r"models.m.checkpoint: '.*w.pth' does not exist"):
        validated(lambda c: c["models"].update(m=entry), check_paths=True)
    with pytest.raises(ConfigError, match="models.m: 'checkpoint' is a required property"):
        validated(lambda c: c["models"].update(m={k: v for k, v in entry.items() if k != "checkpoint"}))
    with pytest.raises(ConfigError, match="models.m.weights: 'v1' does not match .*the sha256 of the checkpoint"):
        validated(lambda c: c["models"].update(m=entry | {"weights": "v1"}))
    # config/tta.yaml's placeholder validates as shipped, and is refused when the workflow runs (check_paths),
    # before Snakemake builds a weights folder from it
    validated(lambda c: c["models"].update(m=entry | {"weights": "0" * 64}))
    with pytest.raises(ConfigError, match="models.m.weights: the placeholder sha256 names no file"):
        validated(lambda c: c["models"].update(m=entry | {"weights": "0" * 64}), check_paths=True)


def test_a_local_checkpoint_is_kept_in_a_folder_named_by_its_content(network, tmp_path) -> None:
    """Named by the file's sha256, which the onstart check compares with the pinned one; a URL by the pinned one."""
    path = tmp_path / "w.pth"
    sha = save(network.state_dict(), path, "zip")
    res = str(tmp_path / "res")
    assert weights_folder(spec(path, sha), res) == f"{res}/weights/checkpoint/{ARCH}.{sha}"
    assert weights_folder(spec(path, "1" * 64), res) == f"{res}/weights/checkpoint/{ARCH}.{sha}"
    url = {"url": "https://example.org/w.pth"}
    assert weights_folder(spec(url, "1" * 64), res) == f"{res}/weights/checkpoint/{ARCH}.{'1' * 64}"
