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

A source may also declare ``options``, a frozen dataclass of the config keys only it reads (with their defaults);
``input_size(spec)``, the input size of an entry that gives none, where it is not 224; ``evaluation(spec,
module)``, the weights' own evaluation transform (:mod:`zoomeval.inference.eval_transform`, for the standard
evaluation); ``head(spec, resources)``, the name of a derived file every job of the model reads (open_clip: its
zero-shot head, made by the ``zero_shot_head`` rule and passed to ``load`` as ``head=``); ``local(spec)``, the
local checkpoint file an entry names (its ``checkpoint`` key), if the source reads one; ``names()``, the catalogue
of the library's architectures and pretrained tags (:mod:`zoomeval.inference.catalogue`), with ``library`` the PyPI
distribution it comes from; ``canonical(name, entry)``, the config entry with the library's usual spellings of a
model (timm's ``arch.tag``, torchvision's ``Enum.TAG``) turned into the ``architecture``/``weights`` pair. A
function named as its field is passed by :func:`hooks` (``**hooks(check, fetch)``).

Weights are kept by content, never by name alone: a local checkpoint's folder is
``<resources>/weights/<source>/<architecture>.<sha256 of the file>`` (:func:`weights_folder`, hashed when the DAG is
built and remembered while the file is unchanged), so two entries whose files share a ``weights`` name never share
a folder, and a file replaced at the same path gets a new folder, which reruns every job that reads it. Downloads
are kept under the tag that pins them (``<architecture>.<weights>``, timm's ``arch.tag``) and named by the hash
their publisher gives.

No source imports torch when it is registered: building the workflow's DAG reads the registry.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoomeval.core import checksums
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import ConfigError, ModelSpec, Triple
from zoomeval.core.io import link_or_copy
from zoomeval.core.registry import Registry

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

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
    #: what the prediction metadata records beyond the spec (open_clip: the zero-shot head's provenance)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the ImageNet-1k classes its logits cover (:mod:`zoomeval.inference.class_order`); None: all 1000
    classes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ModelSource:
    name: str
    load: Callable[..., LoadedModel]
    check: Callable[[ModelSpec], None]
    fetch: Callable[[ModelSpec, Path], None] | None = None
    required: tuple[str, ...] = ("architecture", "weights")
    options: type | None = None
    input_size: Callable[[ModelSpec], int] | None = None
    evaluation: Callable[[ModelSpec, Any], Any] | None = None
    head: Callable[[ModelSpec, str], str] | None = None
    local: Callable[[ModelSpec], Path | None] | None = None
    #: the library's catalogue of architectures and tags (:mod:`zoomeval.inference.catalogue`; imports it) and the
    #: distribution whose version keys its cache
    names: Callable[[], Any] | None = None
    library: str | None = None
    canonical: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None


MODEL_SOURCES: Registry[ModelSource] = Registry("model source", ModelSource)


def hooks(*functions: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """A source module's functions as keywords of ``MODEL_SOURCES.register``, each under its own name, which is the
    :class:`ModelSource` field it fills: ``**hooks(check, fetch)`` for ``check=check, fetch=fetch``."""
    return {function.__name__: function for function in functions}


def local_checkpoint(spec: ModelSpec) -> Path | None:
    """The local checkpoint file ``spec`` names (None: its weights are downloaded or ship in a package)."""
    local = MODEL_SOURCES.get(spec.source).local
    return None if local is None else local(spec)


def local_sha256(spec: ModelSpec, resources: str) -> str | None:
    """The sha256 of ``spec``'s local checkpoint file, remembered in ``<resources>/weights`` while the file is
    unchanged (:func:`zoomeval.core.checksums.sha256`); None: it names none."""
    if (path := local_checkpoint(spec)) is None:
        return None
    if not path.is_file():
        raise ConfigError(f"models.{spec.name}.checkpoint: {path} is not a file; point the key at the checkpoint")
    return checksums.sha256(path, Path(resources) / "weights")


def weights_folder(spec: ModelSpec, resources: str) -> str | None:
    """Where the workflow keeps ``spec``'s weights (None: its source fetches nothing): named by the sha256 of a local
    checkpoint, else by the tag that pins the download."""
    if MODEL_SOURCES.get(spec.source).fetch is None:
        return None
    return f"{resources}/weights/{spec.source}/{spec.architecture}.{local_sha256(spec, resources) or spec.weights}"


def fetched_weights(spec: ModelSpec, resources: str) -> Path | None:
    """``spec``'s weights folder under ``resources`` (:func:`weights_folder`), downloaded there first if it is
    missing; None: its source fetches nothing. For a process outside the workflow (an audit, a wrapper, a bench)."""
    folder = weights_folder(spec, resources)
    if folder is None:
        return None
    if not Path(folder).is_dir():
        fetch_weights(spec, Path(folder))
    return Path(folder)


def head_name(spec: ModelSpec, resources: str) -> str | None:
    """The name of the derived file every job of ``spec`` reads (open_clip: its zero-shot head); None: none."""
    head = MODEL_SOURCES.get(spec.source).head
    return None if head is None else head(spec, resources)


def fetch_weights(spec: ModelSpec, folder: Path, resources: str | None = None) -> None:
    """Download ``spec``'s weights into ``folder`` (a source without downloads has nothing to do); with
    ``resources`` (the workflow's job), ``folder`` must still be :func:`weights_folder`'s, so a local checkpoint
    replaced since the workflow was planned is refused rather than placed in the folder named by the old one."""
    fetch = MODEL_SOURCES.get(spec.source).fetch
    if fetch is None:
        return
    if resources is not None and Path(planned := str(weights_folder(spec, resources))) != folder:
        raise ValueError(
            f"models.{spec.name}.checkpoint: {local_checkpoint(spec)} changed since the workflow was planned (its "
            f"weights now go to {planned}, not {folder}); run the same command again"
        )
    log.info("fetching the weights of model %r into %s", spec.name, folder)
    folder.mkdir(parents=True, exist_ok=True)
    fetch(spec, folder)


def check_model(spec: ModelSpec) -> None:
    """Refuse an entry whose architecture or weights its source does not have (imports torchvision or timm)."""
    MODEL_SOURCES.get(spec.source).check(spec)


def load_model(spec: ModelSpec, weights: Path | None, head: Path | None = None) -> LoadedModel:
    """Build ``spec``'s network with its pinned and verified weights (fetched into ``weights``), in eval mode on the
    CPU, normalised with the entry's ``mean``/``std`` or else the weights' own; ``head``: the derived file of a
    source that declares one."""
    source = MODEL_SOURCES.get(spec.source)
    loaded = source.load(spec, weights, head=head) if source.head is not None else source.load(spec, weights)
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


def place_hub_file(path: Path, what: str, folder: Path) -> None:
    """Check a file huggingface_hub cached (``path``, in a snapshot) against the sha256 the hub published for it
    (``what``: repo and file name, for messages) and place it in ``folder`` as ``<sha256><suffix>``, hard-linked
    where the file system allows (else copied)."""
    blob = path.resolve()  # snapshots/<commit>/<file> links to blobs/<etag>
    if not re.fullmatch(r"[0-9a-f]{64}", blob.name):
        raise ValueError(
            f"{path}: huggingface_hub did not store it under its sha256 (a cache without symlinks?), so it cannot "
            "be checked; use a cache on a file system with symlinks (HF_HOME)"
        )
    source = f"the sha256 the hub published for {what}, under which huggingface_hub stored it"
    verified_sha256(blob, blob.name, source, "delete it to download it again")
    link_or_copy(blob, folder / f"{blob.name}{path.suffix}")
