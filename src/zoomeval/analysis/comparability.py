"""What a result was computed from: the sha256 of the files it read and its comparability key: the evaluation
protocol (dataset and the exact images and labels scored, class set, label set, variant, zoom grid, the greedy picks
counted, the exact cover's work limit, for a dataset read from a hub the commit it was read at, and the zoomeval
release), the model's settings (model and weights, input size and normalisation, precision, compile settings,
resizing) and where it came from (the workflow's commit). Two results rank against each other where their protocols
agree (:data:`FIELD_ROLES`); the model's settings and the provenance are what a ranking shows of each."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from zoomeval.core.checksums import sha256_file
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid


def digest(value: Any) -> str:
    """sha256 of a JSON value (keys sorted)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def images_digest(records: Sequence[Record]) -> str:
    """The scored images and their labels, in order, as one sha256."""
    return digest([[r.image_id, list(r.labels)] for r in records])


def class_set(meta: dict[str, Any]) -> str:
    """``full``, or ``subset`` with its class count and the digest of its class indices."""
    indices = meta.get("class_indices")
    return "full" if indices is None else f"subset of {len(indices)} classes ({digest(indices)[:12]})"


def comparability_key(
    meta: dict[str, Any], images: str, label_set: str, top_k: int, cover_node_limit: int | None
) -> dict[str, Any]:
    """The key of a result from its prediction file's metadata ``meta``, the digest of the scored images
    (:func:`images_digest`), the label set, the greedy picks counted and the exact cover's node limit: the one
    declaration of the key's fields (:data:`KEY_FIELDS`), in the order notes name them."""
    model = meta.get("model") or {}
    arch_tag = f"{model['architecture']}.{model['weights']}" if {"architecture", "weights"} <= model.keys() else None
    grid = ZoomGrid(meta.get("scales") or [])
    return {
        "dataset": meta.get("dataset"),
        "images": images,
        "class_set": class_set(meta),
        "label_set": label_set,
        "variant": meta.get("variant"),
        "scales": meta.get("scales"),
        "anchors": len({(t.row, t.col) for t in grid.transforms}),
        "resize_backend": meta.get("resize_backend"),
        "model": arch_tag,
        "weights_sha256": model.get("weights_sha256"),
        "input_size": meta.get("crop_size"),
        "mean": model.get("mean"),
        "std": model.get("std"),
        "precision": meta.get("precision"),
        "compile": meta.get("compile"),
        "channels_last": meta.get("channels_last"),
        "top_k": top_k,
        "zoomeval": meta.get("zoomeval"),
        "zoomeval_commit": meta.get("zoomeval_commit"),
        "cover_node_limit": cover_node_limit,
        "revisions": meta.get("dataset_revisions"),  # the hub commit of each input read from a hub, else None
    }


#: The comparability key's fields, in the order notes name them (those :func:`comparability_key` gives).
KEY_FIELDS = tuple(comparability_key({}, "", "", 0, None))
PROTOCOL, MODEL, PROVENANCE = "protocol", "model", "provenance"
#: Each key field's role: ``protocol``, what makes two numbers comparable (results rank together only where every
#: protocol field agrees); ``model``, the evaluated model's own settings (a column of its row); ``provenance``, where
#: the result came from. The zoomeval release is protocol: a change that alters numbers is released under a new
#: version (CHANGELOG.md), so two releases' results never rank together while two commits of one release do.
FIELD_ROLES = {
    "dataset": PROTOCOL,
    "images": PROTOCOL,
    "class_set": PROTOCOL,
    "label_set": PROTOCOL,
    "variant": PROTOCOL,
    "scales": PROTOCOL,
    "anchors": PROTOCOL,
    "resize_backend": MODEL,
    "model": MODEL,
    "weights_sha256": MODEL,
    "input_size": MODEL,
    "mean": MODEL,
    "std": MODEL,
    "precision": MODEL,
    "compile": MODEL,
    "channels_last": MODEL,
    "top_k": PROTOCOL,
    "zoomeval": PROTOCOL,
    "zoomeval_commit": PROVENANCE,
    "cover_node_limit": PROTOCOL,
    "revisions": PROTOCOL,
}
PROTOCOL_FIELDS = tuple(f for f in KEY_FIELDS if FIELD_ROLES[f] == PROTOCOL)
MODEL_FIELDS = tuple(f for f in KEY_FIELDS if FIELD_ROLES[f] == MODEL)


def canonical(value: Any) -> Any:
    """``value`` with each real number in one spelling, float32's shortest (a normalisation recorded from a float32
    tensor, ``0.48500001430511475``, reads as the ``0.485`` it is), so that values equal in meaning compare equal:
    the model normalises its input in float32, so values that float32 holds alike give it the same input."""
    if isinstance(value, float):
        return float(str(np.float32(value)))
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def protocol(key: dict[str, Any]) -> dict[str, Any]:
    """The protocol fields of a key, canonical (:data:`FIELD_ROLES`)."""
    return {f: canonical(key.get(f)) for f in PROTOCOL_FIELDS}


def model_settings(key: dict[str, Any]) -> dict[str, Any]:
    """The model's settings in a key, canonical: the same model evaluated alike has the same."""
    return {f: canonical(key.get(f)) for f in MODEL_FIELDS}


def file_input(path: str | os.PathLike[str]) -> dict[str, str]:
    """A file a result read: its path as given (relative to the study directory in the workflow) and sha256."""
    return {"path": os.fspath(path), "sha256": sha256_file(path)}


def key_differences(key: dict[str, Any], other: dict[str, Any], fields: Sequence[str] = KEY_FIELDS) -> list[str]:
    """The ``fields`` where ``key`` differs from ``other`` in meaning (:func:`canonical`), each as ``field value (not
    other value)``."""
    return [f"{f} {_shown(key.get(f))} (not {_shown(other.get(f))})" for f in _differing(key, other, fields)]


def _differing(key: dict[str, Any], other: dict[str, Any], fields: Sequence[str]) -> list[str]:
    return [f for f in fields if canonical(key.get(f)) != canonical(other.get(f))]


#: How a heading names a key field where its own name is not the words (the rest: the field's name).
WORDS = {
    "images": "scored images sha256",
    "weights_sha256": "weights sha256",
    "input_size": "input size",
    "class_set": "class set",
    "label_set": "label set",
    "resize_backend": "resize backend",
    "channels_last": "channels last",
    "zoomeval_commit": "zoomeval commit",
    "cover_node_limit": "cover node limit",
    "revisions": "hub revisions",
}


def worded_differences(key: dict[str, Any], other: dict[str, Any], fields: Sequence[str] = KEY_FIELDS) -> list[str]:
    """The ``fields`` where ``key`` differs from ``other`` in words, each as ``field value (not other value)``:
    ``scales 224–448 (not 224–1024)``, ``weights sha256 abababababab… (not cdcdcdcdcdcd…)``; scales that share their
    range are listed in full (``scales 64, 224, 256 (not 64, 256)``)."""
    out = []
    for field in _differing(key, other, fields):
        mine, theirs = _worded(field, key.get(field)), _worded(field, other.get(field))
        if mine == theirs:  # alike in words (the same scale range): every value
            mine, theirs = _worded(field, key.get(field), full=True), _worded(field, other.get(field), full=True)
        out.append(f"{WORDS.get(field, field)} {mine} (not {theirs})")
    return out


def _worded(field: str, value: Any, full: bool = False) -> str:
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        if field == "scales" and not full:
            return f"{min(value)}–{max(value)}" if len(value) > 1 else f"{value[0]}"
        return ("/" if field in ("mean", "std") else ", ").join(f"{v:g}" for v in value)
    if isinstance(value, str) and len(value) == 64:  # a sha256
        return f"{value[:12]}…"
    return _shown(value)


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:  # a sha256: its first 12 digits tell it apart
        return value[:12]
    return value if isinstance(value, str) else json.dumps(value)
