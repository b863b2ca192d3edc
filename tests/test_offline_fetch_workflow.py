"""Offline, the fetch_weights jobs of a torchvision and a timm model fail at once (no retries), and their messages
name the URL or Hub repo, the destination and the file name: with the way out refusing connections (a closed port
on 127.0.0.1) and with no route (a host name that never resolves)."""

import os
import re
import socket
from datetime import datetime

import pytest

pytestmark = pytest.mark.workflow
TORCHVISION = "resources/weights/torchvision/resnet18.IMAGENET1K_V1"
TIMM = "resources/weights/timm/test_resnet.r160_in1k"
MODELS = {
    "r18": {"source": "torchvision", "architecture": "resnet18", "weights": "IMAGENET1K_V1"},
    "t": {"source": "timm", "architecture": "test_resnet", "weights": "r160_in1k"},
}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seconds_to_failure(log: str) -> tuple[float, float]:
    """By the log's own timestamps: from the job's first line (the fetch starting, before torch and timm are
    imported) and from its last line before the failure (the download starting) to the failure."""
    found = re.findall(r"^(\S+ \S+) (?:INFO|ERROR) ", log, re.MULTILINE)
    stamps = [datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f") for stamp in found]
    return (stamps[-1] - stamps[0]).total_seconds(), (stamps[-1] - stamps[-2]).total_seconds()


@pytest.mark.parametrize("way_out", ["refused", "no_route"])
def test_offline_weight_fetches_fail_at_once_saying_what_to_do(
    tmp_path, snakemake_run, config_writer, monkeypatch, way_out
):
    host = f"127.0.0.1:{closed_port()}" if way_out == "refused" else "nonexistent.invalid:3128"
    for var in [k for k in os.environ if "proxy" in k.lower() or k.startswith("HF_")]:
        monkeypatch.delenv(var)
    # what the workflow's jobs inherit: the way out (a proxy for torchvision's https URL, the Hub's endpoint)
    for var, value in [
        ("https_proxy", f"http://{host}"),
        ("HF_ENDPOINT", f"http://{host}"),
        ("HF_HOME", str(tmp_path / "hf")),
        ("TORCH_HOME", str(tmp_path / "torch")),
    ]:
        monkeypatch.setenv(var, value)
    config_writer(
        tmp_path,
        scales=[64],
        top_k=1,
        datasets={"demo": {"adapter": "demo", "variants": ["original"]}},
        models=MODELS,
        stats={"pairs": []},
    )

    run = snakemake_run(tmp_path, TORCHVISION, TIMM, "--keep-going", check=False)

    out = run.stdout + run.stderr
    assert run.returncode != 0 and out.count("Error in rule fetch_weights") == 2, out
    logs = {
        name: (tmp_path / f"logs/fetch/{folder.removeprefix('resources/')}.log").read_text()
        for name, folder in (("torchvision", TORCHVISION), ("timm", TIMM))
    }
    torchvision, timm = logs["torchvision"], logs["timm"]
    for log in logs.values():
        assert "cannot reach the host" in log and "so it was not retried" in log, log
        assert "Retrying" not in log and "--until fetch_url fetch_hf fetch_weights" in log, log
        assert re.search(r" INFO zoomeval.datasets.download: downloading ", log), log
        job, download = seconds_to_failure(log)
        print(f"{way_out}: failed {job:.1f} s after the fetch started, {download:.2f} s after the download did")
        assert download < 5 and job < 60  # generous bounds: the point is that nothing was retried
    assert "https://download.pytorch.org/models/resnet18-f37072fd.pth" in torchvision
    assert f"put it at {TORCHVISION}/resnet18-f37072fd.pth (file name resnet18-f37072fd.pth)" in torchvision
    assert f"{tmp_path}/torch/hub/checkpoints/resnet18-f37072fd.pth" in torchvision  # torch's hub cache (TORCH_HOME)
    assert "the Hugging Face repo timm/test_resnet.r160_in1k (model.safetensors or pytorch_model.bin)" in timm
    assert f"put it in {TIMM} as <sha256>.safetensors" in timm and "HF_HUB_OFFLINE=1" in timm
