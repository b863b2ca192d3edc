"""Model sources: where a config entry's network and weights come from, and how they are checked and loaded.

A source is one module of :mod:`zoomeval.inference.sources` that registers its loader::

    @MODEL_SOURCES.register("torchvision", check=check, fetch=fetch)
    def load(spec: ModelSpec, weights: Path | None) -> LoadedModel: ...

``required`` names the config keys it reads besides the common ones (default: ``architecture`` and ``weights``,
which the schema requires of every entry; a test keeps the schema in step); ``check(spec)`` refuses an
entry whose architecture or weights do not exist, raising :class:`~zoomeval.core.config.ConfigError` (run when a
workflow run starts, since it may import torchvision or timm); ``fetch(spec, folder)`` downloads the weights into
``folder`` (the workflow's ``fetch_weights`` job, whose output is that folder), or is None for weights that need
no download. ``load(spec, folder)`` builds the network with those weights, after checking the weights file's
sha256 against the published one: every load, not only the download, so a corrupted or replaced file is refused.

No source imports torch when it is registered: building the workflow's DAG reads the registry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import ModelSpec, Triple
from zoomeval.core.registry import Registry

if TYPE_CHECKING:
    import torch

#: ImageNet's mean and std of pixels in [0, 1].
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class LoadedModel:
    """A network in eval mode on the CPU, the sha256 of its weights file and the normalisation it is fed."""

    module: torch.nn.Module
    weights_sha256: str | None
    mean: Triple
    std: Triple


@dataclass(frozen=True)
class ModelSource:
    name: str
    load: Callable[[ModelSpec, Path | None], LoadedModel]
    check: Callable[[ModelSpec], None]
    fetch: Callable[[ModelSpec, Path], None] | None = None
    required: tuple[str, ...] = ("architecture", "weights")


MODEL_SOURCES: Registry[ModelSource] = Registry("model source", ModelSource)


def weights_folder(spec: ModelSpec, resources: str) -> str | None:
    """Where the workflow keeps ``spec``'s downloaded weights (None: its source downloads nothing)."""
    if MODEL_SOURCES.get(spec.source).fetch is None:
        return None
    return f"{resources}/weights/{spec.source}/{spec.architecture}.{spec.weights}"


def fetch_weights(spec: ModelSpec, folder: Path) -> None:
    """Download ``spec``'s weights into ``folder`` (a source without downloads has nothing to do)."""
    fetch = MODEL_SOURCES.get(spec.source).fetch
    if fetch is not None:
        folder.mkdir(parents=True, exist_ok=True)
        fetch(spec, folder)


def check_model(spec: ModelSpec) -> None:
    """Refuse an entry whose architecture or weights its source does not have (imports torchvision or timm)."""
    MODEL_SOURCES.get(spec.source).check(spec)


def load_model(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    """Build ``spec``'s network with its pinned and verified weights (fetched into ``weights``), in eval mode on the
    CPU, normalised with the entry's ``mean``/``std`` or else the weights' own."""
    loaded = MODEL_SOURCES.get(spec.source).load(spec, weights)
    loaded.module.eval()
    return replace(loaded, mean=spec.mean or loaded.mean, std=spec.std or loaded.std)


def verified_sha256(path: Path, published: str, source: str, fix: str) -> str:
    """``path``'s sha256, after checking that it starts with ``published`` (a full hash or a prefix)."""
    actual = sha256_file(path)
    if not actual.startswith(published):
        raise ValueError(
            f"{path}: sha256 {actual} does not match {published} ({source}); the file is corrupt or was "
            f"replaced, so its weights are not the published ones: {fix}"
        )
    return actual


def fetched_file(folder: Path | None, pattern: str, spec: ModelSpec) -> Path:
    """The one weights file in ``folder`` whose name matches the regular expression ``pattern``; refused, saying
    how to fetch it, when there is none."""
    names = sorted(p.name for p in folder.iterdir()) if folder is not None and folder.is_dir() else []
    found = [name for name in names if re.fullmatch(pattern, name)]
    if len(found) != 1:
        raise FileNotFoundError(
            f"model {spec.name!r}: expected one weights file {pattern} in {folder}, found {found}; the "
            "workflow's fetch_weights job downloads it (zoomeval.inference.models.fetch_weights outside it)"
        )
    return folder / found[0]  # type: ignore[operator]
