"""Random-initialised weights files on disk for the three local-weights routes (a torchvision checkpoint, a timm
architecture's safetensors file, a model from an entry point), and a tiny installed distribution whose entry points
(group ``zoomeval.models``) define models: a ``.dist-info`` folder with ``entry_points.txt`` beside its package,
found by importlib.metadata on ``sys.path`` or ``PYTHONPATH`` (no pip, no network)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import timm
import torch
import torchvision
from safetensors.torch import save_file
from torch import nn

from zoomeval.core.checksums import sha256_file

PACKAGE = "zoomeval_tiny_models"
DISTRIBUTION = "zoomeval-tiny-models"
#: A small torchvision architecture and a tiny timm one (timm's test models: 0.36 M parameters, trained at 160 px).
TORCHVISION_ARCH, TIMM_ARCH = "mobilenet_v3_small", "test_efficientnet"
#: name -> what the function returns (the module is random-initialised; zoomeval loads the checkpoint into it)
ENTRY_POINTS = {
    "tiny_net": "tiny(), TRANSFORM, list(reversed(wnids()))",  # its logits in reverse ImageNet order
    "tiny_subset": "tiny(200), TRANSFORM, list(wnids()[:200])",  # the first 200 classes only
    "broken": "1 / 0",
    "no_module": "'a network', TRANSFORM, list(wnids())",
    "class_indices": "tiny(), TRANSFORM, list(range(1000))",
    "twice": "tiny(), TRANSFORM, [wnids()[0], *wnids()[:999]]",
    "no_normalize": "tiny(), T.Compose([T.Resize(72), T.CenterCrop(64), T.ToTensor()]), list(wnids())",
    "two_values": "tiny(), TRANSFORM",
}
SOURCE = '''\
"""A user's own models for zoomeval (a test fixture)."""
import torch
from torchvision import transforms as T

from zoomeval.core.classes import wnids

TRANSFORM = T.Compose([T.Resize(72, T.InterpolationMode.BICUBIC), T.CenterCrop(64), T.ToTensor(),
                       T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])


def tiny(classes=1000):
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 5, stride=4), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, classes))
'''


def write_distribution(folder: Path, name: str = DISTRIBUTION, points: dict[str, str] = ENTRY_POINTS) -> Path:
    """An installed distribution ``name`` 0.1 in ``folder`` (a ``sys.path`` entry) whose entry points are
    ``points`` (name -> the returned expression); returns ``folder``."""
    module = PACKAGE if name == DISTRIBUTION else name.replace("-", "_")
    (folder / module).mkdir(parents=True, exist_ok=True)
    functions = "".join(f"\n\ndef {point}():\n    return {value}\n" for point, value in points.items())
    (folder / module / "__init__.py").write_text(SOURCE + functions)
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{point} = {module}:{point}\n" for point in points)
    (info / "entry_points.txt").write_text(f"[zoomeval.models]\n{lines}")
    return folder


def tiny_module(classes: int = 1000) -> nn.Module:
    """The entry points' network, built by the fixture package's own source."""
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)  # noqa: S102 (the fixture's own source)
    return namespace["tiny"](classes)  # type: ignore[operator]


def save_weights(build: Callable[[], nn.Module], path: Path, seed: int, wrap: bool = False) -> str:
    """Save the state dict of a network ``build`` makes with random-init weights (``seed``) to ``path`` (safetensors
    for a ``.safetensors`` name; ``wrap``: as a DataParallel training checkpoint) and return the file's sha256."""
    torch.manual_seed(seed)
    state = build().state_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".safetensors":
        save_file({k: v.contiguous() for k, v in state.items()}, path)
    elif wrap:
        torch.save({"epoch": 90, "state_dict": {f"module.{k}": v for k, v in state.items()}}, path)
    else:
        torch.save(state, path)
    return sha256_file(path)


def model_entries(folder: Path) -> dict[str, dict[str, object]]:
    """A config's model entry for each route, with a random-init checkpoint written under ``folder`` (the
    distribution of the entry points too)."""
    write_distribution(folder / "site")
    files = {"ckpt": folder / "ckpt.pth.tar", "timm_file": folder / "timm.safetensors", "own": folder / "own.pth"}
    shas = {
        "ckpt": save_weights(lambda: torchvision.models.get_model(TORCHVISION_ARCH), files["ckpt"], 1, wrap=True),
        "timm_file": save_weights(lambda: timm.create_model(TIMM_ARCH), files["timm_file"], 2),
        "own": save_weights(tiny_module, files["own"], 3),
    }
    sources = {
        "ckpt": ("checkpoint", TORCHVISION_ARCH),
        "timm_file": ("timm", TIMM_ARCH),
        "own": ("entry_point", "tiny_net"),
    }
    entries = {
        name: {"source": source, "architecture": arch, "weights": shas[name], "checkpoint": str(files[name])}
        for name, (source, arch) in sources.items()
    }
    entries["own"]["input_size"] = 64
    return entries
