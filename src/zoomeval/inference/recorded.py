"""A model rebuilt from what a file records of it (a prediction file's ``model`` metadata, a policy file's model
entry) for a process that did not run the study: an audit, a zoom-policy wrapper.

Such a record is a document received, not a config the user wrote, so nothing in it becomes a path or a download:
its source must be a registered one and its architecture and weights tag the names their library knows (the
source's own check, as for a config entry), and a local checkpoint or checkpoint URL it records is not read. Its
weights are looked for by the sha256 the record pins, in the reader's own ``<resources>/weights`` folder, and every
load checks them against it again. Weights a library fetches by its own catalogue (a timm or torchvision tag) are
fetched there where allowed. What this catches: a record that would make the reader create, link, hash or fetch
anything outside its resources (a path in the architecture, a checkpoint path or URL of the record's choosing).
What it cannot: weights the reader placed in its resources itself are trusted as far as their sha256."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from zoomeval.core.config import ModelSpec
from zoomeval.inference.models import MODEL_SOURCES, check_model, fetched_weights, weights_folder

#: The config entry's fields a prediction file's ``model`` metadata records (besides ``name`` and ``options``).
_ENTRY_FIELDS = {f.name for f in fields(ModelSpec)} - {"name", "options"}
#: A name that is one path component: what an architecture and weights tag may be when a folder is named by them.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Entry options that name local files (open_clip's head inputs): a record's are not read.
_LOCAL_OPTIONS = ("class_names", "templates", "model_config")


def recorded_spec(model: Any, where: str = "the recorded model") -> ModelSpec:
    """The model entry a file's ``model`` metadata records (its config entry, with the normalisation it was fed as
    its ``mean``/``std``), typed by its source as the config would be; refused in one line naming ``where`` where it
    is no entry, names no known source, or names an architecture or tag that is no name or local files."""
    try:
        entry = {k: v for k, v in model.items() if k in _ENTRY_FIELDS and v is not None} | (model.get("options") or {})
        MODEL_SOURCES.get(entry.get("source"))
        spec = ModelSpec.from_config(str(model["name"]), entry, MODEL_SOURCES)
        for key in ("architecture", "weights"):
            if not _NAME.fullmatch(str(getattr(spec, key))):
                raise ValueError(f"{key} {getattr(spec, key)!r} is not a name")
        if options := [k for k in _LOCAL_OPTIONS if getattr(spec.options, k, None) is not None]:
            raise ValueError(f"it names local files ({', '.join(options)}), which a record's reader does not read")
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"{where}: {_one_line(exc)}") from None
    return spec


def recorded_model(
    model: Any, resources: str | Path, fetch: bool, where: str = "the recorded model"
) -> tuple[ModelSpec, Path | None]:
    """The entry of a file's ``model`` record (:func:`recorded_spec`), checked by its source as a config entry is,
    and its weights folder under ``resources`` (None: its source fetches nothing). A checkpoint the record names is
    looked for only in ``resources``, by the record's ``weights_sha256``, and the entry returned names that file; a
    library's tag is fetched there if missing and ``fetch``, else must be there already."""
    spec = recorded_spec(model, where)
    try:
        if spec.checkpoint is not None:
            spec = replace(
                spec, checkpoint={"path": str(_pinned_checkpoint(spec, model.get("weights_sha256"), resources))}
            )
        check_model(spec)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {_one_line(exc)}") from None
    if MODEL_SOURCES.get(spec.source).fetch is None:
        return spec, None
    if spec.checkpoint is not None:
        return spec, Path(spec.checkpoint["path"]).parent
    folder = Path(str(weights_folder(spec, str(resources))))
    if not fetch and not folder.is_dir():
        raise ValueError(f"{folder}: no such folder: the weights of {where} are not under {resources}")
    return spec, fetched_weights(spec, str(resources)) if fetch else folder


def _pinned_checkpoint(spec: ModelSpec, weights_sha256: Any, resources: str | Path) -> Path:
    """The file with the sha256 ``weights_sha256`` in ``spec``'s weights folders under ``resources`` (named by
    that sha256, or by the pin in ``weights`` for a download), as the workflow's fetch placed it."""
    from zoomeval.core.checksums import sha256_file

    if not isinstance(weights_sha256, str) or not _SHA256.fullmatch(weights_sha256):
        raise ValueError(f"weights_sha256 {weights_sha256!r} is no sha256")
    base = Path(resources) / "weights" / spec.source
    for tag in dict.fromkeys((weights_sha256, spec.weights)):
        if (folder := base / f"{spec.architecture}.{tag}").is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file() and sha256_file(path) == weights_sha256:
                    return path
    raise ValueError(
        f"no weights file with sha256 {weights_sha256[:12]} under {base}: a checkpoint a record names is not "
        "fetched or read from where it says; place the verified file there (zoomeval run does) or give the "
        "resources folder that holds it"
    )


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc}"
    return " ".join(str(exc).split()) or type(exc).__name__
