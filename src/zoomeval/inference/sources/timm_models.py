"""``timm``: ``timm.create_model("<architecture>.<weights>", pretrained=True)`` with the checkpoint of the tag's
Hugging Face repo (``model.safetensors``, else ``pytorch_model.bin``), or any timm architecture with the weights of a
local file (``checkpoint``, pinned by its sha256 in ``weights``), as timm's own ``validate.py --model <architecture>
--checkpoint <file>`` evaluates it.

The download goes through huggingface_hub's own cache, as timm does (resumed downloads, ``HF_HOME``,
``HF_HUB_OFFLINE``, a cache shared with other tools), which stores the file as a blob named by its etag: for the
hub's LFS files, the sha256 the hub publishes. That blob is checked against its name and then placed in the
workflow's weights folder, hard-linked where the file system allows (else copied), as ``<sha256>.<suffix>``: its
name carries the published hash, which every load checks, as a torchvision checkpoint's name carries its prefix.

A local file is placed, read and loaded strictly as a ``checkpoint`` entry's (:mod:`.checkpoint`: a safetensors
file, or ``torch.load(weights_only=True)``) into ``timm.create_model(<architecture>, num_classes=1000)``, whose
pretrained config is that of the architecture's default tag, or of the tag ``eval_preset`` names; the standard
evaluation uses that config's data config (interpolation, crop_pct, mean/std), as for a pretrained tag.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.catalogue import Catalogue, check_names, closest
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, fetched_file, hooks, place_hub_file, verified_sha256
from zoomeval.inference.sources import checkpoint

#: Where timm's Hugging Face repos keep their weights: safetensors first, as timm itself tries.
HF_WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")
#: A fetched weights file: the published sha256 and the hub file's suffix.
FETCHED = r"[0-9a-f]{64}\.(safetensors|bin)"


@dataclass(frozen=True)
class TimmOptions:
    """The config keys only a ``timm`` entry reads."""

    #: with a local checkpoint: the pretrained tag whose data config evaluates it (None: the architecture's default)
    eval_preset: str | None = None


def hub_source(name: str) -> tuple[str, str | None]:
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


def names() -> Catalogue:
    """timm's models (``timm.list_models()``), pretrained tags (``timm.list_pretrained()``) and their pretrained
    configs' ``num_classes``."""
    import timm
    from timm.models import get_pretrained_cfg

    pretrained: dict[str, list[str]] = {}
    widths = {}
    for name in timm.list_pretrained():
        arch, tag = name.split(".", 1)
        pretrained.setdefault(arch, []).append(tag)
        if (cfg := get_pretrained_cfg(name)) is not None:
            widths[name] = cfg.num_classes
    tags = {arch: tuple(found) for arch, found in pretrained.items()}
    return Catalogue("timm", timm.__version__, tuple(timm.list_models()), tags, widths=widths)


def canonical(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """timm's own ``arch.tag`` spelling (``architecture: resnet50.a1_in1k``, the name of timm's results CSVs and hub
    repos) as architecture and weights; ``weights`` is then optional, and refused if it names another tag."""
    key = f"models.{name}"
    arch, dot, tag = entry["architecture"].partition(".")
    if "checkpoint" in entry:
        return _local_entry(key, entry, dot)
    if "eval_preset" in entry:
        raise ConfigError(
            f"{key}.eval_preset: only a timm model with a checkpoint reads it (a pretrained tag is "
            "evaluated with its own data config); remove it"
        )
    if not dot:
        if "weights" not in entry:
            raise ConfigError(
                f"{key}.weights: required for a timm architecture without a tag; give architecture: "
                f"{arch}.<tag> or weights (zoomeval list models timm '{arch}.*')"
            )
        return entry
    if entry.get("weights", tag) != tag:
        raise ConfigError(
            f"{key}.weights: {entry['weights']!r} disagrees with the tag {tag!r} of architecture "
            f"{entry['architecture']}; remove weights or make them agree"
        )
    return {**entry, "architecture": arch, "weights": tag}


def _local_entry(key: str, entry: dict[str, Any], dot: str) -> dict[str, Any]:
    """An entry with a local checkpoint: a file, and its architecture alone (the tag of the data config goes in
    eval_preset)."""
    if not isinstance(entry["checkpoint"], str) and "path" not in entry["checkpoint"]:
        raise ConfigError(
            f"{key}.checkpoint: a timm checkpoint must be a local file; download it, check it and give its path"
        )
    if dot:
        arch, tag = entry["architecture"].split(".", 1)
        raise ConfigError(
            f"{key}.architecture: with a checkpoint give the architecture alone ({arch}) and the tag "
            f"whose data config evaluates it as eval_preset ({tag})"
        )
    return entry


def _config_name(spec: ModelSpec) -> str:
    """What ``timm.create_model`` builds a local checkpoint's network as: the architecture, with ``eval_preset``."""
    tag = spec.options.eval_preset if spec.options is not None else None
    return spec.architecture if tag is None else f"{spec.architecture}.{tag}"


def _check_local(spec: ModelSpec) -> None:
    """A local checkpoint's architecture must be a timm model (the closest named otherwise), its eval_preset one of
    the architecture's tags, its normalisation and fixed input size those of that data config, its file pinned."""
    import timm
    from timm.data import resolve_data_config
    from timm.models import get_arch_pretrained_cfgs, get_pretrained_cfg

    key, architectures = f"models.{spec.name}", timm.list_models()
    if spec.architecture not in architectures:
        near = ", ".join(closest(spec.architecture, architectures))
        raise ConfigError(
            f"{key}.architecture: {spec.architecture!r} is not a timm architecture (timm.list_models())"
            + (f"; closest: {near}" if near else "")
        )
    tags = [name.partition(".")[2] for name in get_arch_pretrained_cfgs(spec.architecture)]
    if spec.options is not None and spec.options.eval_preset not in (None, *tags):
        raise ConfigError(
            f"{key}.eval_preset: {spec.options.eval_preset!r} is not a tag of timm's {spec.architecture} {tags}"
        )
    if (cfg := get_pretrained_cfg(_config_name(spec))) is None:
        raise ConfigError(f"{key}.architecture: timm's {spec.architecture} has no pretrained config to evaluate with")
    data = resolve_data_config(pretrained_cfg=cfg.to_dict())
    if cfg.fixed_input_size and spec.input_size != (size := data["input_size"][-1]):
        raise ConfigError(
            f"{key}.input_size: {spec.architecture} takes {size} px inputs only, not "
            f"{spec.input_size}; set input_size: {size}"
        )
    checkpoint.check_own_normalisation(spec, data["mean"], data["std"], f"timm's data config of {_config_name(spec)}")
    checkpoint.check_file(spec)


def check(spec: ModelSpec) -> None:
    """The architecture must be a timm model and the weights one of its pretrained tags with weights on the hub, or
    a local checkpoint (:func:`_check_local`)."""
    if spec.checkpoint is not None:
        _check_local(spec)
        return
    key, tag = f"models.{spec.name}", spec.weights
    check_names(spec, names(), "timm")
    try:
        hub_source(f"{spec.architecture}.{tag}")
    except ValueError as exc:
        raise ConfigError(f"{key}.weights: {tag!r}: {exc}") from None


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Download the weights through huggingface_hub's cache, check the blob against the sha256 it is stored under
    and place it in ``folder`` as ``<sha256>.<suffix>`` (a local checkpoint: linked as a ``checkpoint`` entry's)."""
    from zoomeval.datasets.download import hub_file

    if spec.checkpoint is not None:
        checkpoint.fetch(spec, folder)
        return
    repo_id, revision = hub_source(f"{spec.architecture}.{spec.weights}")
    path, filename = hub_file(repo_id, HF_WEIGHTS_FILES, revision, folder)
    place_hub_file(path, f"{repo_id}/{filename}", folder)


def data_transform(cfg: dict[str, Any], what: str) -> Any:
    """timm's evaluation transform of a resolved data config (``timm.data.create_transform``), with the img_size,
    crop_pct and interpolation that timm's results CSVs report (``what`` names the model, for messages)."""
    from timm.data import create_transform

    from zoomeval.inference.eval_transform import split_normalize

    transform = split_normalize(create_transform(**cfg), what)
    settings = {"img_size": cfg["input_size"][-1], "crop_pct": cfg["crop_pct"], "interpolation": cfg["interpolation"]}
    return replace(transform, settings=settings)


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """The model's pretrained config through ``timm.data.resolve_data_config`` / ``create_transform``
    (EfficientNet-L2-NS: Resize(833, bicubic) + CenterCrop(800))."""
    from timm.data import resolve_data_config

    return data_transform(resolve_data_config({}, model=module), f"timm model {spec.name}")


def local(spec: ModelSpec) -> Path | None:
    """The local checkpoint file (None: a pretrained tag's weights)."""
    return None if spec.checkpoint is None else checkpoint.local(spec)


def _load_local(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    import timm

    path, sha = checkpoint.fetched_checkpoint(spec, weights)
    module = timm.create_model(_config_name(spec), pretrained=False, num_classes=NUM_CLASSES)
    checkpoint.fit(module, path, f"timm's {spec.architecture}", f"models.{spec.name}.architecture")
    cfg = module.pretrained_cfg
    return LoadedModel(module, sha, tuple(cfg["mean"]), tuple(cfg["std"]))  # type: ignore[arg-type]


@MODEL_SOURCES.register(
    "timm",
    **hooks(check, fetch, evaluation, names, canonical, local),
    library="timm",
    required=("architecture",),
    options=TimmOptions,
)
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    import timm

    if spec.checkpoint is not None:
        return _load_local(spec, weights)
    path = fetched_file(weights, FETCHED, spec)
    source = "the sha256 the hub published for it, which its name carries"
    sha = verified_sha256(path, path.name.split(".")[0], source, f"delete {path.parent} to download it again")
    # timm reads exactly the file checked above (its own loader would look the file up again).
    name = f"{spec.architecture}.{spec.weights}"
    module = timm.create_model(name, pretrained=True, pretrained_cfg_overlay={"file": str(path), "hf_hub_id": None})
    cfg = module.pretrained_cfg
    return LoadedModel(module, sha, tuple(cfg["mean"]), tuple(cfg["std"]))  # type: ignore[arg-type]
