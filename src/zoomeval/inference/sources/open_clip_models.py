"""``open_clip``: an image-text model (OpenAI CLIP, LAION, DataComp, DFN, SigLIP, ... through the PyPI package
``open-clip-torch``) used as a 1000-way ImageNet classifier with a zero-shot head (:mod:`zoomeval.inference.zero_shot`).

An entry names an open_clip architecture (``open_clip.list_models()``) and a pretrained tag of it
(``open_clip.list_pretrained()``), or a local ``checkpoint`` file (``weights`` then only names it). A tag's weights
come from the Hugging Face repo of open_clip's pretrained config (the files open_clip's own
``download_pretrained_from_hf`` tries), downloaded into huggingface_hub's cache, checked against the sha256 the hub
publishes and placed in the workflow's weights folder as ``<sha256><suffix>``, as for timm; a local checkpoint is
placed under its sha256 too, in a folder named by that sha256 (so by its content, never by the ``weights`` name
alone), and every load checks the file against its name. ``model_config`` may point to an open_clip model-config
JSON (``embed_dim``, ``vision_cfg``, ``text_cfg``) named ``<architecture>.json``, for an architecture open_clip does
not ship.

Two settings of open_clip's own ``create_model(arch, pretrained=tag)`` are taken from the tag rather than from
the architecture's config, because open_clip 3.3 only warns when they disagree:

* activation: 28 tags (``ViT-L-14`` + ``openai`` among them) were trained with QuickGELU while their architecture's
  config builds GELU; the model is built with QuickGELU whenever the tag says so;
* preprocessing: the tag's ``mean``, ``std``, ``interpolation`` and ``resize_mode``.

Unless the entry gives ``mean``/``std``, the zoom grid normalises with the tag's (OpenAI's for CLIP); the input
size is the architecture's image size (224 for ViT-L-14, 336 for ViT-L-14-336), read from its model-config JSON
without importing open_clip (which imports torch), since the workflow's DAG needs it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import ConfigError, InputSpec, ModelSpec
from zoomeval.core.config_schema import schema_defaults
from zoomeval.core.extras import missing_extra
from zoomeval.core.io import link_or_copy
from zoomeval.inference import zero_shot
from zoomeval.inference.catalogue import Catalogue
from zoomeval.inference.models import (
    MODEL_SOURCES,
    LoadedModel,
    fetched_file,
    hooks,
    local_sha256,
    place_hub_file,
    verified_sha256,
)

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

#: Preprocessing keys of an open_clip pretrained config that describe the weights' expected inputs.
PREPROCESS_KEYS = ("mean", "std", "interpolation", "resize_mode")
CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
#: The prefix of open_clip's Hugging Face names (``hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K``).
HF_HUB = "hf-hub:"
#: A weights file in the workflow's weights folder: its sha256 and suffix.
FETCHED = r"[0-9a-f]{64}\.(safetensors|bin|pt|pth)"


@dataclass(frozen=True)
@schema_defaults("models", "*")
class OpenClipOptions:
    """The config keys only an ``open_clip`` entry reads."""

    #: a text file with the 1000 class names (default: open_clip's CLIP-curated names)
    class_names: str | None = None
    #: a text file with one prompt template per line (default: open_clip's 80 OpenAI templates)
    templates: str | None = None
    #: classes that share a name keep it (argmax returns the first) or get WordNet lemmas
    duplicate_names: str
    #: an open_clip model-config JSON named <architecture>.json, for an architecture open_clip lacks
    model_config: str | None = None


def _options(spec: ModelSpec) -> OpenClipOptions:
    return spec.options or OpenClipOptions()


def local_checkpoint(spec: ModelSpec) -> Path | None:
    """The entry's ``checkpoint`` file, used instead of a pretrained tag (None: the tag's weights). A URL is refused:
    ``weights`` pins no sha256 for open_clip, so a download could not be checked."""
    if spec.checkpoint is None:
        return None
    given = InputSpec.from_config(spec.checkpoint)
    if given.path is None:
        raise ConfigError(
            f"models.{spec.name}.checkpoint: an open_clip checkpoint must be a local file; download it and give its "
            "path (weights pins no sha256 for open_clip to check a download against)"
        )
    return Path(given.path)


def model_config(spec: ModelSpec) -> dict[str, Any]:
    """The architecture's model-config JSON (the entry's ``model_config`` or open_clip's), read without importing
    open_clip; refused naming the key when there is none."""
    key, given = f"models.{spec.name}", _options(spec).model_config
    if given is not None:
        path = Path(given)
        if path.stem != spec.architecture or path.suffix != ".json" or not path.is_file():
            raise ConfigError(f"{key}.model_config: {path} must be an existing file named {spec.architecture}.json")
    else:
        package = find_spec("open_clip")
        if package is None:
            raise ConfigError(missing_extra(f"{key}.source", "open_clip", "clip"))
        folder = Path(next(iter(package.submodule_search_locations or [])))
        path = folder / "model_configs" / f"{spec.architecture}.json"
        if not path.is_file():
            raise ConfigError(
                f"{key}.architecture: {spec.architecture!r} is not an open_clip architecture "
                "(open_clip.list_models()); for another one, give model_config"
            )
    return json.loads(path.read_text())


def input_size(spec: ModelSpec) -> int:
    """The square input size of the entry's architecture."""
    size = model_config(spec)["vision_cfg"]["image_size"]
    if isinstance(size, list | tuple):
        if len(set(size)) != 1:
            raise ConfigError(
                f"models.{spec.name}.architecture: {spec.architecture} takes {size[0]}x{size[1]} "
                "inputs; zoomeval crops are square"
            )
        size = size[0]
    return int(size)


def _file_sha256(path: str | None, key: str) -> str | None:
    if path is None:
        return None
    if not Path(path).is_file():
        raise ConfigError(f"{key}: {path} does not exist; point it at the file or remove the key")
    return sha256_file(Path(path))


def head_name(spec: ModelSpec, resources: str) -> str:
    """The file name (without suffix) of the zero-shot head ``spec`` needs: architecture, weights and a digest of
    everything the head depends on (a local checkpoint by its sha256, not its path), so entries that differ only in
    what the head ignores (mean, std) share it. Read when the DAG is built: file hashes, no open_clip."""
    options, key = _options(spec), f"models.{spec.name}"
    files = {k: _file_sha256(getattr(options, k), f"{key}.{k}") for k in ("class_names", "templates", "model_config")}
    digest = json.dumps(
        [spec.architecture, spec.weights, local_sha256(spec, resources), options.duplicate_names, files]
    )
    return f"{spec.architecture}.{spec.weights}.{hashlib.sha256(digest.encode()).hexdigest()[:12]}"


def head_inputs(spec: ModelSpec) -> list[str]:
    """The local files a head depends on, so that Snakemake reruns it when one of them changes."""
    options = _options(spec)
    return [f for f in (options.class_names, options.templates, options.model_config) if f]


def register_model_config(spec: ModelSpec) -> None:
    """Make a ``model_config`` architecture known to open_clip (its own ones are)."""
    import open_clip

    if (given := _options(spec).model_config) is None:
        model_config(spec)
        return
    known = open_clip.get_model_config(spec.architecture)
    if known is None:
        open_clip.add_model_config(Path(given))
    elif known != model_config(spec):
        raise ConfigError(
            f"models.{spec.name}.model_config: {spec.architecture!r} is already an open_clip "
            "architecture with another config"
        )


def pretrained_cfg(spec: ModelSpec) -> dict[str, Any]:
    """open_clip's pretrained config of the entry's tag (``{}`` for a local checkpoint); refused naming the key."""
    from open_clip.pretrained import get_pretrained_cfg, list_pretrained_tags_by_model

    if local_checkpoint(spec) is not None:
        return {}
    tags = list_pretrained_tags_by_model(spec.architecture)
    if spec.weights not in tags:
        raise ConfigError(
            f"models.{spec.name}.weights: {spec.weights!r} is not a pretrained tag of "
            f"{spec.architecture} ({tags}); for a local file give checkpoint"
        )
    return dict(get_pretrained_cfg(spec.architecture, spec.weights))


def check(spec: ModelSpec) -> None:
    """Refuse an entry that cannot work, naming the key (imports open_clip: run when a workflow run starts)."""
    import open_clip

    key, options = f"models.{spec.name}", _options(spec)
    register_model_config(spec)
    cfg = pretrained_cfg(spec)
    if (path := local_checkpoint(spec)) is not None:
        if path.suffix not in CHECKPOINT_SUFFIXES or not path.is_file():
            raise ConfigError(f"{key}.checkpoint: {path} must be an existing {'/'.join(CHECKPOINT_SUFFIXES)} file")
    elif open_clip.get_model_config(spec.architecture).get("quick_gelu") and not cfg.get("quick_gelu"):
        raise ConfigError(
            f"{key}.architecture: {spec.architecture} builds QuickGELU but tag {spec.weights!r} was "
            "trained with GELU; use the architecture without -quickgelu"
        )
    if spec.input_size != (size := input_size(spec)):
        raise ConfigError(
            f"{key}.input_size: {spec.architecture} takes {size} px inputs, not {spec.input_size}; remove the key"
        )
    try:
        names = zero_shot.class_names(options.class_names, f"{key}.class_names")
        zero_shot.templates(options.templates, f"{key}.templates")
        zero_shot.resolve_duplicates(names.items, options.duplicate_names)
    except ValueError as exc:
        raise ConfigError(str(exc) if str(exc).startswith(key) else f"{key}.{exc}") from None


def names() -> Catalogue:
    """open_clip's architectures (``open_clip.list_models()``) and pretrained tags (``open_clip.list_pretrained()``)."""
    import open_clip
    from open_clip.pretrained import get_pretrained_cfg

    pretrained: dict[str, list[str]] = {}
    hubs: dict[str, list[tuple[str, str]]] = {}
    for arch, tag in open_clip.list_pretrained():
        pretrained.setdefault(arch, []).append(tag)
        if hub := get_pretrained_cfg(arch, tag).get("hf_hub"):  # "org/repo/" or "org/repo/<file>"
            hubs.setdefault(HF_HUB + "/".join(hub.split("/")[:2]), []).append((arch, tag))
    tags = {arch: tuple(found) for arch, found in pretrained.items()}
    aliases = {name: tuple(pairs) for name, pairs in hubs.items()}
    return Catalogue("open_clip", open_clip.__version__, tuple(open_clip.list_models()), tags, aliases)


def canonical(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """An ``hf-hub:<org>/<repo>`` architecture as the architecture and tag of open_clip's pretrained list whose
    weights are that repo's (resolved offline, from the list; of an architecture and its ``-quickgelu`` twin, the
    plain one, which the tag's QuickGELU setting builds alike); ``weights`` is then optional and refused if it
    names another tag. Repos outside the list are refused: open_clip would fetch their config from the hub."""
    from zoomeval.inference.catalogue import CACHE, cached_catalogue

    given = entry["architecture"]
    if not given.startswith(HF_HUB):
        return entry
    cat = cached_catalogue("open_clip", CACHE)
    pairs = cat.aliases.get(given, ()) if cat is not None else ()
    plain = [p for p in pairs if not p[0].endswith("-quickgelu")] or list(pairs)
    key = f"models.{name}"
    if len(plain) != 1:
        found = f"it names {plain}" if plain else "no pretrained tag of open_clip's list has its weights there"
        raise ConfigError(
            f"{key}.architecture: {given}: {found}; give an open_clip architecture and weights "
            "(zoomeval list models open_clip)"
        )
    arch, tag = plain[0]
    if entry.get("weights", tag) != tag:
        raise ConfigError(
            f"{key}.weights: {entry['weights']!r} disagrees with {given}, open_clip's {arch} + {tag!r}; "
            "remove weights or make them agree"
        )
    return {**entry, "architecture": arch, "weights": tag}


def hub_files(spec: ModelSpec) -> tuple[str, list[str]]:
    """The Hugging Face repo of a tag's weights and the file names open_clip's own download_pretrained_from_hf
    tries there, a safetensors alternative first."""
    from open_clip.constants import HF_WEIGHTS_NAME
    from open_clip.pretrained import _get_safe_alternatives

    cfg = pretrained_cfg(spec)
    if not cfg.get("hf_hub"):
        raise ValueError(
            f"open_clip tag {spec.architecture}/{spec.weights} has no Hugging Face repo to check its hash against"
        )
    # open_clip's convention: "org/repo/" (its default file name) or "org/repo/<file>"
    hub = cfg["hf_hub"]
    repo_id, filename = (hub.rstrip("/"), HF_WEIGHTS_NAME) if hub.endswith("/") else hub.rsplit("/", 1)
    return repo_id, [*_get_safe_alternatives(filename), filename]


def fetch(spec: ModelSpec, folder: Path) -> None:
    """Place the weights in ``folder`` as ``<sha256><suffix>``: a tag's from its Hugging Face repo through
    huggingface_hub's cache (checked against the hub's sha256), or the local checkpoint."""
    from zoomeval.datasets.download import hub_file

    if (path := local_checkpoint(spec)) is not None:
        link_or_copy(path, folder / f"{sha256_file(path)}{path.suffix}")
        return
    repo_id, filenames = hub_files(spec)
    path, name = hub_file(repo_id, filenames, None, folder)
    place_hub_file(path, f"{repo_id}/{name}", folder)


def create(spec: ModelSpec, weights: Path | None) -> tuple[torch.nn.Module, Path, str]:
    """The open_clip model with its checked weights (fetched into ``weights``), in eval mode on the CPU, and the
    weights file and its sha256."""
    import open_clip

    register_model_config(spec)
    path = fetched_file(weights, FETCHED, spec)
    sha = verified_sha256(
        path, path.name.split(".")[0], "the sha256 its name carries", f"delete {path.parent} to fetch it again"
    )
    cfg = pretrained_cfg(spec)
    model = open_clip.create_model(
        spec.architecture,
        pretrained=str(path),
        force_quick_gelu=bool(cfg.get("quick_gelu")),
        force_preprocess_cfg={k: cfg[k] for k in PREPROCESS_KEYS if k in cfg},
    )
    return model.eval(), path, sha


def head_identity(spec: ModelSpec, weights_sha256: str) -> dict[str, Any]:
    """What a head must have been computed from to serve ``spec`` (checked when a job loads it)."""
    options = _options(spec)
    return {
        "architecture": spec.architecture,
        "weights": spec.weights,
        "weights_sha256": weights_sha256,
        "class_names_sha256": zero_shot.class_names(options.class_names).sha256,
        "templates_sha256": zero_shot.templates(options.templates).sha256,
        "duplicate_policy": options.duplicate_names,
    }


def build_head(spec: ModelSpec, weights: Path | None, device: torch.device) -> tuple[torch.Tensor, dict[str, Any]]:
    """Compute the zero-shot head of ``spec`` on ``device``; returns it with its provenance."""
    import open_clip

    options = _options(spec)
    model, _, sha = create(spec, weights)
    names = zero_shot.class_names(options.class_names)
    prompts = zero_shot.templates(options.templates)
    resolved, record = zero_shot.resolve_duplicates(names.items, options.duplicate_names)
    tokenizer = open_clip.get_tokenizer(spec.architecture)
    head = zero_shot.compute_head(model.to(device), tokenizer, resolved, prompts.items, device)
    provenance = {
        **head_identity(spec, sha),
        "open_clip": open_clip.__version__,
        "class_names": names.source,
        "templates": prompts.source,
        "template_list": list(prompts.items),
        "duplicate_names": record,
        "logit_scale": zero_shot.LOGIT_SCALE,
        "n_classes": head.shape[0],
        "embed_dim": head.shape[1],
    }
    return head, provenance


def evaluation(spec: ModelSpec, module: torch.nn.Module) -> Any:
    """The model's own preprocess (``image_transform_v2`` of its preprocess config; CLIP: Resize(224 or 336,
    bicubic) + CenterCrop)."""
    from open_clip.transform import PreprocessCfg, image_transform_v2

    from zoomeval.inference.eval_transform import split_normalize

    cfg = PreprocessCfg(**module.model.visual.preprocess_cfg)
    return split_normalize(image_transform_v2(cfg, is_train=False), f"open_clip model {spec.name}")


@MODEL_SOURCES.register(
    "open_clip",
    **hooks(check, fetch, input_size, evaluation, names, canonical),
    options=OpenClipOptions,
    head=head_name,
    local=local_checkpoint,
    library="open_clip_torch",
)
def load(spec: ModelSpec, weights: Path | None, head: Path | None = None) -> LoadedModel:
    """The classifier of an entry: its model with checked weights and the cached zero-shot head ``head``, which must
    have been computed from this entry's weights, class names, templates and duplicate-name policy."""
    if head is None:
        raise ValueError(f"model {spec.name!r}: an open_clip model needs its zero-shot head file (rule zero_shot_head)")
    model, _, sha = create(spec, weights)
    matrix, document = zero_shot.read_head(head)
    expected = head_identity(spec, sha)
    if stale := {k: (document.get(k), v) for k, v in expected.items() if document.get(k) != v}:
        raise ValueError(
            f"{head}: this zero-shot head was computed for other settings than model {spec.name!r} "
            f"({', '.join(f'{k}: {old!r}, now {new!r}' for k, (old, new) in stale.items())}); rebuild it with "
            "snakemake --forcerun zero_shot_head"
        )
    log.info(
        "loaded zero-shot head %s: %d classes x %d templates (%s), duplicate names: %s",
        head,
        document["n_classes"],
        len(document["template_list"]),
        document["templates"],
        document["duplicate_names"]["policy"],
    )
    from zoomeval.inference.zero_shot_classifier import ZeroShotClassifier

    keys = (*expected, "open_clip", "class_names", "templates", "template_list", "duplicate_names", "logit_scale")
    cfg = model.visual.preprocess_cfg
    return LoadedModel(
        ZeroShotClassifier(model, matrix).eval(),
        sha,
        tuple(cfg["mean"]),  # type: ignore[arg-type]
        tuple(cfg["std"]),  # type: ignore[arg-type]
        {"zero_shot": {k: document[k] for k in keys}},
    )
