"""``checkpoint``: a torchvision architecture with the weights of a training checkpoint that its authors published
outside any package index, such as the ``.pth.tar`` files of DeepAugment+AugMix (Hendrycks et al. 2021) and
MoEx+CutMix (Li et al. 2021) that MEMO evaluates.

The entry names the ``architecture`` (``torchvision.models.list_models()``), the ``checkpoint`` (a local path,
``{path: ...}`` or ``{url: ...}``) and, as ``weights``, the sha256 of the copy the user verified: the authors
publish no checksums, so zoomeval pins none. The workflow's ``fetch_weights`` job downloads a URL, or links a local
file, into the weights folder as ``<sha256>.pth`` after checking it; every load checks it again. It is read with
``torch.load(weights_only=True)`` only: tensors and plain Python values (the epoch, the architecture name, the best
accuracy, the optimizer state) load, anything that would need another class or function is refused, so a pickle
that would run code runs nothing. The weights are the ``state_dict`` entry (or the whole file, if it is a bare
state dict), with DataParallel's ``module.`` prefixes stripped, loaded strictly.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import TYPE_CHECKING

from zoomeval.core.config import ConfigError, InputSpec, ModelSpec
from zoomeval.core.io import link_or_copy
from zoomeval.inference.models import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    MODEL_SOURCES,
    LoadedModel,
    fetched_file,
    verified_sha256,
)

if TYPE_CHECKING:
    import torch

PREFIX = "module."


def _input(spec: ModelSpec) -> InputSpec:
    if spec.checkpoint is None:
        raise ConfigError(f"models.{spec.name}.checkpoint is required for source checkpoint: a local path or {{url}}")
    return InputSpec.from_config(spec.checkpoint)


def _verified_local(spec: ModelSpec, path: Path) -> str:
    """``path``'s sha256, after checking it is a file with the sha256 pinned in ``weights``."""
    key = f"models.{spec.name}"
    if not path.is_file():
        raise FileNotFoundError(f"{key}.checkpoint: {path} is not a file; download it and point the key at it")
    fix = (
        f"point {key}.checkpoint at the checkpoint you verified, or verify this one (its authors publish no "
        f"checksum) and pin its sha256 in {key}.weights"
    )
    return verified_sha256(path, spec.weights, f"pinned in {key}.weights", fix)


def check(spec: ModelSpec) -> None:
    """The architecture must be a torchvision model; a local checkpoint must have the pinned sha256."""
    import torchvision

    key = f"models.{spec.name}"
    if spec.architecture not in torchvision.models.list_models():
        raise ConfigError(
            f"{key}.architecture: {spec.architecture!r} is not a torchvision model (torchvision.models.list_models())"
        )
    source = _input(spec)
    if source.path is not None:
        try:
            _verified_local(spec, Path(source.path))
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError(str(exc)) from None


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Download the checkpoint's URL, or link the local file, into ``folder`` as ``<sha256>.pth``, checked."""
    from zoomeval.datasets.download import download

    source, dest = _input(spec), folder / f"{spec.weights}.pth"
    if source.url is not None:
        download(source.url, dest, spec.weights)
        return
    _verified_local(spec, Path(str(source.path)))
    link_or_copy(str(source.path), dest)


def local(spec: ModelSpec) -> Path | None:
    """The checkpoint's local file (None: a URL)."""
    source = _input(spec)
    return None if source.path is None else Path(source.path)


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The weights in a training checkpoint or a bare state dict, ``module.`` prefixes stripped; refuses a file
    that needs anything but tensors and plain Python values to load."""
    import torch

    try:
        content = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"it needs {found.group(1)}" if found else str(exc).splitlines()[0]
        raise ValueError(
            f"{path}: refused: torch.load(weights_only=True) reads only tensors and plain Python values, and {what}. "
            "Unpickling anything else can run code, so zoomeval does not. If you trust the file, re-save its state "
            "dict from an isolated environment (torch.save(checkpoint['state_dict'], 'weights.pth')) and point the "
            "config at that file with its sha256"
        ) from None
    state = content.get("state_dict", content) if isinstance(content, dict) else None
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        keys = sorted(content)[:10] if isinstance(content, dict) else type(content).__name__
        raise ValueError(f"{path}: neither a checkpoint with a 'state_dict' of tensors nor a state dict (found {keys})")
    prefixed = [k.startswith(PREFIX) for k in state]
    if any(prefixed) and not all(prefixed):
        raise ValueError(f"{path}: only some keys of its state dict start with {PREFIX!r}; it is not one model's")
    return {k.removeprefix(PREFIX): v for k, v in state.items()}


def build(spec: ModelSpec, path: Path) -> torch.nn.Module:
    """torchvision's ``spec.architecture`` with the weights of the checkpoint ``path``, loaded strictly."""
    import torchvision

    module = torchvision.models.get_model(spec.architecture, weights=None)
    try:
        missing, unexpected = module.load_state_dict(read_state_dict(path), strict=False)
    except RuntimeError as exc:  # shapes that differ
        raise ValueError(f"{path}: its weights do not fit torchvision's {spec.architecture}: {exc}") from None
    if missing or unexpected:
        raise ValueError(
            f"{path}: its weights do not fit torchvision's {spec.architecture}: missing {missing[:5]} "
            f"({len(missing)} in all), unexpected {unexpected[:5]} ({len(unexpected)} in all); check "
            f"models.{spec.name}.architecture"
        )
    return module


@MODEL_SOURCES.register(
    "checkpoint", check=check, fetch=fetch, required=("architecture", "weights", "checkpoint"), local=local
)
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    """The fetched checkpoint, checked against the sha256 pinned in ``weights``; ImageNet's normalisation unless the
    entry gives its own ``mean``/``std``."""
    path = fetched_file(weights, re.escape(f"{spec.weights}.pth"), spec)
    sha = verified_sha256(path, spec.weights, f"pinned in models.{spec.name}.weights", f"delete {path.parent}")
    return LoadedModel(build(spec, path), sha, IMAGENET_MEAN, IMAGENET_STD)
