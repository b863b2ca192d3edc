"""``checkpoint``: a torchvision architecture with the weights of a training checkpoint that its authors published
outside any package index, such as the ``.pth.tar`` files of DeepAugment+AugMix (Hendrycks et al. 2021) and
MoEx+CutMix (Li et al. 2021) that MEMO evaluates.

The entry names the ``architecture`` (``torchvision.models.list_models()``), the ``checkpoint`` (a local path,
``{path: ...}`` or ``{url: ...}``) and, as ``weights``, the sha256 of the copy the user verified: the authors
publish no checksums, so zoomeval pins none. The workflow's ``fetch_weights`` job downloads a URL, or links a local
file, into the weights folder as ``<sha256>.pth`` (``<sha256>.safetensors`` for a safetensors file) after checking
it; every load checks it again. A ``.pth`` is read with ``torch.load(weights_only=True)`` only: tensors and plain
Python values (the epoch, the architecture name, the best accuracy, the optimizer state) load, anything that would
need another class or function is refused, so a pickle that would run code runs nothing; a safetensors file holds
tensors only. The weights are the ``state_dict`` entry (or the whole file, if it is a bare state dict), with
DataParallel's ``module.`` prefixes stripped, loaded strictly.

The standard evaluation and the weights' normalisation are those of a torchvision weights preset of the
architecture (``eval_preset``, default ``IMAGENET1K_V1``: e.g. Resize(256, bilinear) + CenterCrop(224) and
ImageNet's mean/std for ResNet-50): name the preset of the recipe the checkpoint was trained with. The other
local-weights routes (a timm architecture's file, a model from an entry point) read their files with the functions
here.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoomeval.core.config import ConfigError, InputSpec, ModelSpec
from zoomeval.core.io import link_or_copy
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, fetched_file, hooks, verified_sha256

if TYPE_CHECKING:
    import torch

PREFIX = "module."
SAFETENSORS = ".safetensors"
#: The torchvision weights tag whose preset a checkpoint is evaluated with unless the entry names another.
DEFAULT_PRESET = "IMAGENET1K_V1"


@dataclass(frozen=True)
class CheckpointOptions:
    """The config keys only a ``checkpoint`` entry reads."""

    #: the torchvision weights tag of the architecture whose transforms() preset is the standard evaluation (None:
    #: :data:`DEFAULT_PRESET`, left out of the entry so that the jobs of entries made before the key rerun nothing)
    eval_preset: str | None = None


def _input(spec: ModelSpec) -> InputSpec:
    if spec.checkpoint is None:
        raise ConfigError(
            f"models.{spec.name}.checkpoint is required for source {spec.source}: a local path or {{url}}"
        )
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


def check_file(spec: ModelSpec) -> None:
    """A local checkpoint must have the pinned sha256 (a URL is checked when it is downloaded; a file that does not
    exist is refused by the config's path check, :func:`zoomeval.core.validate.missing_inputs`, and when fetched)."""
    source = _input(spec)
    if source.path is not None and Path(source.path).exists():
        try:
            _verified_local(spec, Path(source.path))
        except FileNotFoundError as exc:  # a folder
            raise ConfigError(str(exc)) from None
        except ValueError as exc:
            raise ConfigError(f"models.{spec.name}.weights: {exc}") from None


def check_own_normalisation(spec: ModelSpec, mean: tuple[float, ...], std: tuple[float, ...], what: str) -> None:
    """Refuse an entry's ``mean``/``std`` that differ from those of its weights' evaluation transform (``what``):
    a local file's weights have no normalisation but that one, so the zoom grid and the standard evaluation would
    feed them two different ones."""
    import numpy as np

    for key, given, own in (("mean", spec.mean, mean), ("std", spec.std, std)):
        if given is not None and not np.allclose(given, own):
            raise ConfigError(
                f"models.{spec.name}.{key}: {list(given)} differs from the {list(own)} of {what}, "
                "which the standard evaluation feeds these weights; remove the key, or evaluate "
                "with a transform of that normalisation"
            )


def eval_preset(spec: ModelSpec) -> str:
    """The weights tag whose preset the entry is evaluated with."""
    return (spec.options.eval_preset if spec.options is not None else None) or DEFAULT_PRESET


def _preset(spec: ModelSpec) -> Any:
    """The entry's torchvision weights preset (``eval_preset``), refused naming the key and the architecture's tags."""
    import torchvision

    tag = eval_preset(spec)
    enum = torchvision.models.get_model_weights(spec.architecture)
    if tag not in enum.__members__ or tag == "DEFAULT":
        tags = [w.name for w in enum]
        raise ConfigError(
            f"models.{spec.name}.eval_preset: {tag!r} is not a weights tag of torchvision's "
            f"{spec.architecture} {tags}; name the one whose preset the checkpoint was trained "
            "with"
        )
    return enum[tag].transforms()


def check(spec: ModelSpec) -> None:
    """The architecture must be a torchvision model with the preset named; a local checkpoint must have the pinned
    sha256; a ``mean``/``std`` given must be the preset's."""
    import torchvision

    key = f"models.{spec.name}"
    if spec.architecture not in torchvision.models.list_models():
        raise ConfigError(
            f"{key}.architecture: {spec.architecture!r} is not a torchvision model (torchvision.models.list_models())"
        )
    preset = _preset(spec)
    check_own_normalisation(spec, tuple(preset.mean), tuple(preset.std), f"eval_preset {eval_preset(spec)}")
    check_file(spec)


def fetched_name(spec: ModelSpec) -> str:
    """The fetched file's name in the weights folder: the pinned sha256 and ``.safetensors`` or ``.pth``."""
    source = _input(spec)
    name = source.file_name if source.url is not None else str(source.path)
    return f"{spec.weights}{SAFETENSORS if name.endswith(SAFETENSORS) else '.pth'}"


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Download the checkpoint's URL, or link the local file, into ``folder`` as :func:`fetched_name`, checked."""
    from zoomeval.datasets.download import download

    source, dest = _input(spec), folder / fetched_name(spec)
    if source.url is not None:
        download(source.url, dest, spec.weights)
        return
    _verified_local(spec, Path(str(source.path)))
    link_or_copy(str(source.path), dest)


def local(spec: ModelSpec) -> Path | None:
    """The checkpoint's local file (None: a URL)."""
    source = _input(spec)
    return None if source.path is None else Path(source.path)


def _read(path: Path) -> Any:
    """A safetensors file's tensors, or a ``torch.load(weights_only=True)`` of any other file."""
    import torch

    if path.suffix == SAFETENSORS:
        from safetensors.torch import load_file

        return load_file(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"it needs {found.group(1)}" if found else str(exc).splitlines()[0]
        raise ValueError(
            f"{path}: refused: torch.load(weights_only=True) reads only tensors and plain Python values, and {what}. "
            "Unpickling anything else can run code, so zoomeval does not. If you trust the file, re-save its state "
            "dict from an isolated environment (torch.save(checkpoint['state_dict'], 'weights.pth')) and point the "
            "config at that file with its sha256"
        ) from None


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The weights in a training checkpoint or a bare state dict, ``module.`` prefixes stripped; refuses a file
    that needs anything but tensors and plain Python values to load."""
    import torch

    content = _read(path)
    state = content.get("state_dict", content) if isinstance(content, dict) else None
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        keys = sorted(content)[:10] if isinstance(content, dict) else type(content).__name__
        raise ValueError(f"{path}: neither a checkpoint with a 'state_dict' of tensors nor a state dict (found {keys})")
    prefixed = [k.startswith(PREFIX) for k in state]
    if any(prefixed) and not all(prefixed):
        raise ValueError(f"{path}: only some keys of its state dict start with {PREFIX!r}; it is not one model's")
    return {k.removeprefix(PREFIX): v for k, v in state.items()}


def fit(module: torch.nn.Module, path: Path, what: str, key: str) -> torch.nn.Module:
    """``module`` with the weights of the checkpoint ``path`` loaded strictly: every parameter and buffer from the
    file, none left out or extra (``what``: the network, ``key``: the config key to check, for messages)."""
    try:
        missing, unexpected = module.load_state_dict(read_state_dict(path), strict=False)
    except RuntimeError as exc:  # shapes that differ
        raise ValueError(f"{path}: its weights do not fit {what}: {' '.join(str(exc).split())}") from None
    if missing or unexpected:
        raise ValueError(
            f"{path}: its weights do not fit {what}: missing {missing[:5]} ({len(missing)} in all), unexpected "
            f"{unexpected[:5]} ({len(unexpected)} in all); check {key}"
        )
    return module


def fetched_checkpoint(spec: ModelSpec, weights: Path | None) -> tuple[Path, str]:
    """The fetched checkpoint of a local-weights entry and its sha256, checked against the one pinned in
    ``weights``."""
    path = fetched_file(weights, re.escape(fetched_name(spec)), spec)
    return path, verified_sha256(path, spec.weights, f"pinned in models.{spec.name}.weights", f"delete {path.parent}")


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """The ``eval_preset``'s ``transforms()`` preset (torchvision's own steps)."""
    from zoomeval.inference.sources.torchvision_models import preset_transform

    return preset_transform(_preset(spec))


@MODEL_SOURCES.register(
    "checkpoint",
    **hooks(check, fetch, local, evaluation),
    required=("architecture", "weights", "checkpoint"),
    options=CheckpointOptions,
)
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    """The fetched checkpoint, checked against the sha256 pinned in ``weights``, normalised as its ``eval_preset``
    (unless the entry gives its own ``mean``/``std``, which the check holds to the preset's)."""
    import torchvision

    path, sha = fetched_checkpoint(spec, weights)
    module = torchvision.models.get_model(spec.architecture, weights=None)
    fit(module, path, f"torchvision's {spec.architecture}", f"models.{spec.name}.architecture")
    preset = _preset(spec)
    return LoadedModel(module, sha, tuple(preset.mean), tuple(preset.std))  # type: ignore[arg-type]
