"""``zoomeval policy export``: one fitted label-free zoom policy of a study as a small versioned file that
:class:`zoomeval.report.zoom_tta.ZoomTTA` applies to new images.

The policy is fitted again on every image of the scored dataset by :func:`zoomeval.analysis.policies.fit`, with the
study's ``policies`` settings and budgets (the policies job's own), from the correctness matrix and prediction file
the study's analysis read (the file's sha256 checked against the one the analysis recorded): the same inputs give
the same file. The held-out accuracy it records is the study's row for that policy and budget (cross-validated:
each fold fitted on the other images, not this all-image fit)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from zoomeval.analysis.policies import FEATURES, fit
from zoomeval.analysis.policy_eval import budgets_for, read_views
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.io import read_json, read_metadata
from zoomeval.report.zoom_tta import KIND, RULES, SCHEMA_VERSION


def _read(path: Path, *keys: str) -> Any:
    """The value at ``keys`` of the JSON document ``path``, refused naming the file and key where there is none."""
    value = read_json(path)
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"{path}: no {'.'.join(keys)}: not a zoomeval result this version reads")
        value = value[key]
    return value


def study_model(directory: Path, layout: Any, scored: str, variant: str) -> str:
    """The only model with a policies document for ``scored``/``variant``; refused where there are several or none."""
    folder = directory / layout.path("policies", scored=scored, variant=variant, model="x").rsplit("/", 1)[0]
    models = sorted(p.stem for p in folder.glob("*.json"))
    if len(models) != 1:
        raise ValueError(f"--model: {folder} holds policies of {len(models)} models ({', '.join(models) or 'none'}); "
                         "name one")  # fmt: skip
    return models[0]


def _rule(name: str, budget: int, policy: Any) -> tuple[dict[str, Any], list[int]]:
    """The rule of ``name`` at ``budget`` with its fitted parameters, and its views (transform indices) in order."""
    if name == "cascade":
        tau, length = policy.cascade[budget]
        return {"name": name, "tau": None if math.isinf(tau) else tau, "length": length}, policy.max_conf[:length]
    if name == "vote":
        return {"name": name}, policy.vote[:budget]
    if name == "selector" and budget in policy.selector:  # one view: nothing to select, max_conf's rule
        return {"name": name, "features": list(FEATURES), **vars(policy.selector[budget])}, policy.max_conf[:budget]
    return {"name": "max_conf"}, policy.max_conf[:budget]


def _model(meta: dict[str, Any]) -> dict[str, Any]:
    """What identifies the model and its inputs, from a prediction file's metadata."""
    entry = meta["model"]
    return {"name": entry["name"], "architecture": entry["architecture"], "source": entry["source"],
            "weights_sha256": entry["weights_sha256"], "mean": entry["mean"], "std": entry["std"],
            "crop_size": meta["crop_size"], "scales": meta["scales"], "resize_backend": meta["resize_backend"],
            # device and auto crops are PIL's bit for bit; torch's are its own
            "crop_backend": "torch" if meta["resize_backend"] == "torch" else "pil",
            "precision": meta["precision"], "channels_last": meta["channels_last"],
            "class_set": meta.get("class_set"), "class_indices": meta.get("class_indices"), "entry": entry}  # fmt: skip


def export_policy(directory: Path, layout: Any, scored: str, variant: str, model: str, name: str, budget: int,
                  settings: PoliciesConfig) -> dict[str, Any]:  # fmt: skip
    """The policy file's document of policy ``name`` at ``budget`` for ``model`` on ``scored``/``variant``."""
    if name not in RULES:
        raise ValueError(f"--policy: {name!r} is none of {', '.join(RULES)}")
    where = {"scored": scored, "variant": variant, "model": model}
    recorded = _read(directory / layout.path("metrics", **where), "inputs", "predictions")
    if not isinstance(recorded, dict) or not {"path", "sha256"} <= recorded.keys():
        raise ValueError(f"{directory / layout.path('metrics', **where)}: inputs.predictions names no file and sha256")
    predictions = directory / recorded["path"]
    if (actual := sha256_file(predictions)) != recorded["sha256"]:
        raise ValueError(f"{predictions}: sha256 {actual}, not the {recorded['sha256']} the analysis read; "
                         "run the study again")
    path = directory / layout.path("policies", **where)
    rows, protocol = _read(path, "rows"), _read(path, "protocol")
    if (seed := _read(path, "seed")) != settings.seed:  # the config was edited since: not the table's fit
        raise ValueError(f"policies.seed: {settings.seed} in the study's config, {seed} in {path}: the config changed "
                         "since its policies job ran; run the study again (zoomeval run)")
    views, image_ids = read_views(directory / layout.path("correct", **where), predictions)
    budgets = budgets_for(settings.budgets, len(views.order))
    if budget not in budgets:
        raise ValueError(f"--budget: {budget} is none of the study's budgets {budgets}")
    rule, chosen = _rule(name, budget, fit(views, budgets, settings.selector_rows, settings.seed))
    held = [r for r in (rows if isinstance(rows, list) else [])
            if isinstance(r, dict) and r.get("policy") == name and r.get("budget") == budget]  # fmt: skip
    try:
        meta = read_metadata(predictions)
        model, dataset = _model(meta), meta["dataset"]
    except (KeyError, TypeError) as error:
        raise ValueError(f"{predictions}: its metadata has no {error}: not a prediction file this version "
                         "reads") from None
    digest = hashlib.sha256("\n".join(image_ids).encode()).hexdigest()
    return {"kind": KIND, "schema_version": SCHEMA_VERSION, "policy": name, "budget": budget, "rule": rule,
            "views": [[views.order[t].scale, views.order[t].row, views.order[t].col] for t in chosen],
            "model": model,
            "fitted_on": {"dataset": dataset, **where, "n_images": views.n_images, "image_ids_sha256": digest,
                          "predictions": recorded["path"], "predictions_sha256": recorded["sha256"],
                          "budgets": budgets, "seed": settings.seed, "selector_rows": settings.selector_rows},
            "held_out": {"protocol": protocol, **held[0]} if held else None}  # fmt: skip
