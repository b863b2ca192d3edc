"""Failed downloads say what to do: a host that cannot be reached (a refused connection on 127.0.0.1, a name that does
not resolve) fails at once, with the URL or Hub repo and file, where the file goes and under which name, and the
offline routes; a reset connection is retried with backoff; a torchvision checkpoint already in torch's hub cache is
checked and used. Attempts and backoff sleeps are counted, never timed."""

from __future__ import annotations

import hashlib
import socket
import struct
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import huggingface_hub.constants
import huggingface_hub.utils._http
import pytest
import torch
import torchvision

from tests.test_models import R18, TIMM, checkpoint_bytes, publish_r18, random_state
from zoomeval.datasets import download as downloads
from zoomeval.datasets.download import DownloadError, download
from zoomeval.inference.models import fetch_weights, load_model
from zoomeval.inference.sources.torchvision_models import checkpoint

UNRESOLVABLE = "nonexistent.invalid"  # RFC 2606: never resolves


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Straight to 127.0.0.1, and torch's hub cache in the test's folder (not the user's)."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))


@pytest.fixture
def r18_state() -> dict[str, torch.Tensor]:
    return random_state(torchvision.models.resnet18(weights=None), seed=18)


@pytest.fixture
def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def resetting_server() -> Iterator[tuple[int, list[int]]]:
    """A 127.0.0.1 port whose server resets every connection it accepts; yields the port and the accept count."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A 127.0.0.1 port whose server accepts connections and never answers: every request times out."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1, and its base URL."""
    folder = tmp_path / "served"
    folder.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def what_to_do(message: str, *names: str) -> None:
    """The message names each of ``names`` and the offline route every download shares."""
    for name in names:
        assert name in message, (name, message)
    assert "--until fetch_url fetch_hf fetch_weights" in message, message


# download(): the URLs of datasets, SAM, checkpoint sources and torchvision


@pytest.mark.parametrize("host", ["refused", "unresolvable"])
def test_a_host_that_cannot_be_reached_fails_at_once_naming_url_destination_and_file(tmp_path, closed_port, host):
    url = f"http://127.0.0.1:{closed_port}/sam_vit_b.pth" if host == "refused" else f"http://{UNRESOLVABLE}/x.pth"
    dest = tmp_path / "resources" / "sam" / url.rsplit("/", 1)[1]
    sleeps: list[float] = []
    with pytest.raises(DownloadError, match="cannot reach the host .*so it was not retried") as info:
        download(url, dest, sleep=sleeps.append)
    assert sleeps == []  # no backoff, no second attempt
    what_to_do(str(info.value), url, str(dest), f"(file name {dest.name})")
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()


def test_a_reset_connection_is_retried_with_backoff_and_then_says_what_to_do(tmp_path, resetting_server):
    port, accepted = resetting_server
    url, dest = f"http://127.0.0.1:{port}/big.tar", tmp_path / "big.tar"
    sleeps: list[float] = []
    with pytest.raises(DownloadError, match="gave up after 3 attempts") as info:
        download(url, dest, retries=2, backoff=0.5, sleep=sleeps.append)
    assert sleeps == [0.5, 1.0] and len(accepted) == 3
    what_to_do(str(info.value), url, str(dest), "(file name big.tar)")


def test_a_timeout_is_retried_with_backoff(tmp_path, silent_server):
    url, dest = f"http://127.0.0.1:{silent_server}/slow.pth", tmp_path / "slow.pth"
    sleeps: list[float] = []
    with pytest.raises(DownloadError, match="gave up after 2 attempts .*timed out") as info:
        download(url, dest, retries=1, backoff=0.5, timeout=0.2, sleep=sleeps.append)
    assert sleeps == [0.5]
    what_to_do(str(info.value), url, str(dest), "(file name slow.pth)")


def test_unreachable_looks_through_the_exception_chain():
    refused = ConnectionRefusedError(111, "Connection refused")
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = OSError("urlopen error")
    wrapped.__cause__.__context__ = refused
    assert downloads.unreachable(wrapped) is refused
    assert downloads.unreachable(socket.gaierror(-2, "Name or service not known")) is not None
    assert downloads.unreachable(OSError(101, "Network is unreachable")) is not None  # ENETUNREACH
    assert downloads.unreachable(ConnectionResetError(104, "reset")) is None
    assert downloads.unreachable(TimeoutError("timed out")) is None


# torchvision


def test_torchvision_offline_names_the_url_the_folder_the_file_and_torchs_hub_cache(tmp_path, closed_port, monkeypatch):
    url, _ = checkpoint("resnet18", "IMAGENET1K_V1")
    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{closed_port}")  # the way out refuses, as offline
    folder = tmp_path / "weights"
    with pytest.raises(DownloadError, match="cannot reach the host") as info:
        fetch_weights(R18, folder)
    cache = tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    what_to_do(
        str(info.value),
        url,
        str(folder / "resnet18-f37072fd.pth"),
        "(file name resnet18-f37072fd.pth)",
        f"in torch's hub cache as {cache}",
    )


def test_torchvision_takes_a_checked_file_from_torchs_hub_cache(tmp_path, r18_state, closed_port, monkeypatch, capsys):
    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{closed_port}")  # any download would fail
    data = checkpoint_bytes(r18_state)
    folder = tmp_path / "weights"
    final = publish_r18(monkeypatch, folder, data)
    cached = Path(torch.hub.get_dir()) / "checkpoints" / final.name
    assert cached.is_relative_to(tmp_path / "torch")  # TORCH_HOME, as torch.hub.get_dir() reads it
    cached.parent.mkdir(parents=True)
    cached.write_bytes(data)

    fetch_weights(R18, folder)

    assert [p.name for p in folder.iterdir()] == [final.name] and final.read_bytes() == data
    assert f"using {cached} from torch's hub cache" in capsys.readouterr().out
    assert load_model(R18, folder).weights_sha256 == hashlib.sha256(data).hexdigest()
    # a file there that is not the published one is not used: the fetch downloads instead (and fails here)
    final.unlink()
    cached.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(DownloadError, match="cannot reach the host"):
        fetch_weights(R18, folder)
    assert "does not match" in capsys.readouterr().out and list(folder.iterdir()) == []


def test_torchvision_downloads_into_the_folder_checked_against_the_hash_prefix(
    tmp_path, r18_state, served, monkeypatch
) -> None:
    root, base = served
    data = checkpoint_bytes(r18_state)
    folder = tmp_path / "weights"
    final = publish_r18(monkeypatch, folder, data)
    monkeypatch.setattr(torchvision.models.ResNet18_Weights.IMAGENET1K_V1.value, "url", f"{base}/{final.name}")
    (root / final.name).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # not the published file
    with pytest.raises(DownloadError, match=f"sha256 mismatch, expected {final.name[9:17]}"):
        fetch_weights(R18, folder)
    assert list(folder.iterdir()) == []
    (root / final.name).write_bytes(data)
    fetch_weights(R18, folder)
    assert [p.name for p in folder.iterdir()] == [final.name] and final.read_bytes() == data


# timm and open_clip tags: the Hugging Face Hub


@pytest.fixture
def hub_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Point huggingface_hub (online, an empty cache) at an endpoint; returns the backoff sleeps it takes."""
    sleeps: list[float] = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.utils._http.time, "sleep", sleeps.append)

    def point(endpoint: str) -> list[float]:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
        template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        return sleeps

    return point


@pytest.mark.parametrize("host", ["refused", "unresolvable"])
def test_timm_with_an_unreachable_hub_fails_at_once_naming_repo_files_and_folder(tmp_path, hub_at, closed_port, host):
    endpoint = f"http://127.0.0.1:{closed_port}" if host == "refused" else f"http://{UNRESOLVABLE}"
    sleeps = hub_at(endpoint)
    folder = tmp_path / "weights"
    with pytest.raises(DownloadError, match="cannot reach the host .*so it was not retried") as info:
        fetch_weights(TIMM, folder)
    assert sleeps == []  # huggingface_hub's backoff never started (it retries each file 5 times over 23 s)
    repo = f"timm/{TIMM.architecture}.{TIMM.weights}"
    what_to_do(
        str(info.value),
        f"the Hugging Face repo {repo} (model.safetensors or pytorch_model.bin)",
        f"put it in {folder} as <sha256>.safetensors",
        f"{endpoint}/{repo}/blob/main/model.safetensors",
        "HF_HOME=<folder> HF_HUB_OFFLINE=1",
    )
