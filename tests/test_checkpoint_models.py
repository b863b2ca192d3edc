"""Model source ``checkpoint``: authors' ``.pth.tar`` training checkpoints load with ``weights_only=True`` (prefixes
stripped, extra fields ignored, sha256 pinned); a pickle that would run code is refused with nothing executed."""

import copy
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from tests.test_config import validated
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.models import IMAGENET_MEAN, LoadedModel, check_model, fetch_weights, load_model, weights_folder

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
    state = {"epoch": 180, "arch": "resnet50", "state_dict": wrapped.state_dict(), "best_acc1": torch.tensor(75.8),
             "optimizer": optimizer.state_dict()}  # fmt: skip
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
    with pytest.raises(ConfigError, match="models.ckpt.checkpoint: .*missing.pth is not a file"):
        check_model(spec(tmp_path / "missing.pth", sha))


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
