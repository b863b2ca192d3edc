"""``timm``: ``timm.create_model("<architecture>.<weights>", pretrained=True)`` with the checkpoint of the tag's
Hugging Face repo (``model.safetensors``, else ``pytorch_model.bin``).

The download goes through huggingface_hub's own cache, as timm does (resumed downloads, ``HF_HOME``,
``HF_HUB_OFFLINE``, a cache shared with other tools), which stores the file as a blob named by its etag: for the
hub's LFS files, the sha256 the hub publishes. That blob is checked against its name and then placed in the
workflow's weights folder, hard-linked where the file system allows (else copied), as ``<sha256>.<suffix>``: its
name carries the published hash, which every load checks, as a torchvision checkpoint's name carries its prefix.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.catalogue import Catalogue, check_names
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel, fetched_file, place_hub_file, verified_sha256

#: Where timm's Hugging Face repos keep their weights: safetensors first, as timm itself tries.
HF_WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")
#: A fetched weights file: the published sha256 and the hub file's suffix.
FETCHED = r"[0-9a-f]{64}\.(safetensors|bin)"


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
    if not dot:
        if "weights" not in entry:
            raise ConfigError(f"{key}.weights: required for a timm architecture without a tag; give architecture: "
                              f"{arch}.<tag> or weights (zoomeval list models timm '{arch}.*')")  # fmt: skip
        return entry
    if entry.get("weights", tag) != tag:
        raise ConfigError(f"{key}.weights: {entry['weights']!r} disagrees with the tag {tag!r} of architecture "
                          f"{entry['architecture']}; remove weights or make them agree")  # fmt: skip
    return {**entry, "architecture": arch, "weights": tag}


def check(spec: ModelSpec) -> None:
    """The architecture must be a timm model and the weights one of its pretrained tags with weights on the hub."""
    key, tag = f"models.{spec.name}", spec.weights
    check_names(spec, names(), "timm")
    try:
        hub_source(f"{spec.architecture}.{tag}")
    except ValueError as exc:
        raise ConfigError(f"{key}.weights: {tag!r}: {exc}") from None


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Download the weights through huggingface_hub's cache, check the blob against the sha256 it is stored under
    and place it in ``folder`` as ``<sha256>.<suffix>``."""
    from zoomeval.datasets.download import hub_file

    repo_id, revision = hub_source(f"{spec.architecture}.{spec.weights}")
    path, filename = hub_file(repo_id, HF_WEIGHTS_FILES, revision, folder)
    place_hub_file(path, f"{repo_id}/{filename}", folder)


def evaluation(spec: ModelSpec, module: Any) -> Any:
    """The pretrained config through ``timm.data.resolve_data_config`` / ``create_transform`` (EfficientNet-L2-NS:
    Resize(833, bicubic) + CenterCrop(800))."""
    from timm.data import create_transform, resolve_data_config

    from zoomeval.inference.eval_transform import split_normalize

    cfg = resolve_data_config({}, model=module)
    transform = split_normalize(create_transform(**cfg), f"timm model {spec.name}")
    settings = {"img_size": cfg["input_size"][-1], "crop_pct": cfg["crop_pct"], "interpolation": cfg["interpolation"]}
    return replace(transform, settings=settings)


@MODEL_SOURCES.register(
    "timm", check=check, fetch=fetch, evaluation=evaluation, names=names, library="timm", canonical=canonical,
    required=("architecture",),
)  # fmt: skip
def load(spec: ModelSpec, weights: Path | None) -> LoadedModel:
    import timm

    path = fetched_file(weights, FETCHED, spec)
    source = "the sha256 the hub published for it, which its name carries"
    sha = verified_sha256(path, path.name.split(".")[0], source, f"delete {path.parent} to download it again")
    # timm reads exactly the file checked above (its own loader would look the file up again).
    name = f"{spec.architecture}.{spec.weights}"
    module = timm.create_model(name, pretrained=True, pretrained_cfg_overlay={"file": str(path), "hf_hub_id": None})
    cfg = module.pretrained_cfg
    return LoadedModel(module, sha, tuple(cfg["mean"]), tuple(cfg["std"]))  # type: ignore[arg-type]
