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
evaluation); and ``head(spec)``, the name of a derived file every job of the model reads (open_clip: its zero-shot
head, made by the ``zero_shot_head`` rule and passed to ``load`` as ``head=``); ``names()``, the catalogue of the
library's architectures and pretrained tags (:mod:`zoomeval.inference.catalogue`), with ``library`` the PyPI
distribution it comes from; ``canonical(name, entry)``, the config entry with the library's usual spellings of a
model (timm's ``arch.tag``, torchvision's ``Enum.TAG``) turned into the ``architecture``/``weights`` pair.

No source imports torch when it is registered: building the workflow's DAG reads the registry.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    #: what the prediction metadata records beyond the spec (open_clip: the zero-shot head's provenance)
    provenance: dict[str, Any] = field(default_factory=dict)


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
    head: Callable[[ModelSpec], str] | None = None
    #: the library's catalogue of architectures and tags (:mod:`zoomeval.inference.catalogue`; imports it) and the
    #: distribution whose version keys its cache
    names: Callable[[], Any] | None = None
    library: str | None = None
    canonical: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None


MODEL_SOURCES: Registry[ModelSource] = Registry("model source", ModelSource)


def weights_folder(spec: ModelSpec, resources: str) -> str | None:
    """Where the workflow keeps ``spec``'s downloaded weights (None: its source downloads nothing)."""
    if MODEL_SOURCES.get(spec.source).fetch is None:
        return None
    return f"{resources}/weights/{spec.source}/{spec.arch_tag}"


def head_name(spec: ModelSpec) -> str | None:
    """The name of the derived file every job of ``spec`` reads (open_clip: its zero-shot head); None: none."""
    head = MODEL_SOURCES.get(spec.source).head
    return None if head is None else head(spec)


def fetch_weights(spec: ModelSpec, folder: Path) -> None:
    """Download ``spec``'s weights into ``folder`` (a source without downloads has nothing to do)."""
    fetch = MODEL_SOURCES.get(spec.source).fetch
    if fetch is not None:
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


def link_or_copy(source: Path, dest: Path) -> None:
    """Hard-link ``source`` as ``dest``, or copy it atomically where links are not allowed."""
    from zoomeval.core.io import atomic_path  # pyarrow: not at DAG time

    try:
        os.link(source, dest)
    except OSError:  # another file system, or links not allowed
        with atomic_path(dest) as tmp:
            shutil.copyfile(source, tmp)
