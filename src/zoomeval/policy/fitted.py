"""``zoomeval policy save``: one fitted label-free zoom policy of a study as a small versioned file that
:class:`zoomeval.policy.tta.ZoomTTA` applies to new images.

The policy is fitted again by :func:`zoomeval.analysis.policies.fit`, with the study's ``policies`` settings and
budgets (the policies job's own), from the correctness matrix and prediction file the study's analysis read (the
file's sha256 checked against the one the analysis recorded): on every image of the scored dataset (the policy a
transfer job fits on its source), or with ``fold`` on the other folds' images, exactly as the cross-validation
fitted that fold's policy (:func:`zoomeval.analysis.policy_eval.fold_fit`). Every refit is compared with the record
the policies documents keep of the job's own fit (a fold's, a transfer's; for an all-image export also fold 0's,
as the check that the settings still give the job's fits) and refused where they differ. The same inputs give the
same file. The held-out accuracy it records is the study's row for that policy and budget."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.policies import FEATURES, RULES, Policy, Views, fit
from zoomeval.analysis.policy_eval import (
    POLICIES_DOCUMENT,
    assign_folds,
    budgets_for,
    fold_fit,
    policy_record,
    read_views,
)
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.io import read_metadata
from zoomeval.policy.document import POLICY


def study_model(directory: Path, layout: Any, scored: str, variant: str) -> str:
    """The only model with a policies document for ``scored``/``variant``; refused where there are several or none."""
    folder = directory / layout.path("policies", scored=scored, variant=variant, model="x").rsplit("/", 1)[0]
    models = sorted(p.stem for p in folder.glob("*.json"))
    if len(models) != 1:
        raise ValueError(
            f"--model: {folder} holds policies of {len(models)} models ({', '.join(models) or 'none'}); name one"
        )
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
    return {
        "name": entry["name"],
        "architecture": entry["architecture"],
        "source": entry["source"],
        "weights_sha256": entry["weights_sha256"],
        "mean": entry["mean"],
        "std": entry["std"],
        "crop_size": meta["crop_size"],
        "scales": meta["scales"],
        "resize_backend": meta["resize_backend"],
        # device and auto crops are PIL's bit for bit; torch's are its own
        "crop_backend": "torch" if meta["resize_backend"] == "torch" else "pil",
        "precision": meta["precision"],
        "channels_last": meta["channels_last"],
        "class_set": meta.get("class_set"),
        "class_indices": meta.get("class_indices"),
        "entry": entry,
    }


class _Study(NamedTuple):
    """What an export reads of a study: its scored views and image ids, budgets, policies document and where."""

    views: Views
    ids: np.ndarray
    budgets: list[int]
    document: dict[str, Any]
    path: Path
    settings: PoliciesConfig


def _checked(policy: Policy, study: _Study, record: Any, where: Path, what: str, **extra: int) -> Policy:
    """``policy`` where it is, as recorded (with ``extra``), the one the study's policies job fitted (``record``, in
    ``where``)."""
    if json.loads(json.dumps(policy_record(policy, study.views, **extra))) != record:
        raise ValueError(
            f"{where}: {what} fitted here is not the one its policies job fitted: the config's policies "
            "settings (budgets, selector_rows, folds) or the study's inputs changed since; run the study "
            "again (zoomeval run)"
        )
    return policy


def _fold(study: _Study, fold: int) -> tuple[Policy, np.ndarray]:
    """Cross-validation fold ``fold``'s policy (fitted on the other folds' images), checked against its record, and
    which images the fold held out."""
    fitted, path, settings = study.document["fitted"], study.path, study.settings
    if not 0 <= fold < len(fitted):
        why = study.document.get("not_fitted") or f"its folds are 0..{len(fitted) - 1}"
        raise ValueError(f"--fold: {fold} is no fold of {path} ({why})")
    folds = assign_folds(study.views.n_images, settings.folds, settings.seed)
    held = folds == fold
    recorded = study.document["folds"]
    if not isinstance(recorded, list) or len(recorded) != len(fitted) or study.ids[held].tolist() != recorded[fold]:
        raise ValueError(
            f"{path}: fold {fold}'s images are not those policies.folds {settings.folds} and seed "
            f"{settings.seed} deal out here: the config or the study's images changed since its "
            "policies job ran; run the study again (zoomeval run)"
        )
    policy = fold_fit(study.views, folds, fold, study.budgets, settings.selector_rows, settings.seed)
    _checked(policy, study, fitted[fold], path, f"fold {fold}'s policy", fold=fold, n_calibration=int((~held).sum()))
    return policy, held


def _transferred(
    directory: Path, layout: Any, where: dict[str, str], study: _Study, policy: Policy, name: str, budget: int
) -> list[dict[str, Any]]:
    """The rows of ``name`` at ``budget`` of every transfer from the scored dataset (``policy``, fitted on all its
    images, checked against each transfer's record), with the dataset each moved to."""
    pattern = layout.path("policy_transfer", source=where["scored"], **{**where, "scored": "*"})
    out = []
    for path in sorted(directory.glob(pattern)):
        fitted = (document := POLICIES_DOCUMENT.read(path))["fitted"]
        record = fitted[0] if fitted else None
        _checked(policy, study, record, path, "the transfer's policy", n_calibration=study.views.n_images)
        row = _held_row(document, name, budget)
        out += [{"scored": path.parent.parent.name, **row}] if row else []
    return out


def _held_row(document: dict[str, Any], name: str, budget: int) -> dict[str, Any] | None:
    """The row of ``name`` at ``budget`` of a policies document, with its protocol (None: it has none)."""
    held = [
        r for r in document["rows"] if isinstance(r, dict) and r.get("policy") == name and r.get("budget") == budget
    ]
    return {"protocol": document["protocol"], **held[0]} if held else None


def _study(directory: Path, layout: Any, where: dict[str, str], settings: PoliciesConfig) -> tuple[_Study, dict]:
    """The study's views and policies document for ``where``, and the prediction file the analysis read (refused
    where it changed since, or where the config's seed is not the job's)."""
    recorded = (read_metrics(metrics := directory / layout.path("metrics", **where)).inputs or {}).get("predictions")
    if not isinstance(recorded, dict) or not {"path", "sha256"} <= recorded.keys():
        raise ValueError(f"{metrics}: inputs.predictions names no file and sha256")
    predictions = directory / recorded["path"]
    if (actual := sha256_file(predictions)) != recorded["sha256"]:
        raise ValueError(
            f"{predictions}: sha256 {actual}, not the {recorded['sha256']} the analysis read; run the study again"
        )
    document = POLICIES_DOCUMENT.read(path := directory / layout.path("policies", **where))
    if (seed := document["seed"]) != settings.seed:  # the config was edited since: not the table's fit
        raise ValueError(
            f"policies.seed: {settings.seed} in the study's config, {seed} in {path}: the config changed "
            "since its policies job ran; run the study again (zoomeval run)"
        )
    views, image_ids = read_views(directory / layout.path("correct", **where), predictions)
    budgets = budgets_for(settings.budgets, len(views.order))
    return _Study(views, np.asarray(image_ids), budgets, document, path, settings), recorded


def _digest(ids: Sequence[str]) -> str:
    """The sha256 of image ids in order, one a line."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _model_and_dataset(predictions: Path) -> tuple[dict[str, Any], str]:
    """The model key and dataset of the prediction file ``predictions``, from its metadata."""
    try:
        meta = read_metadata(predictions)
        return _model(meta), meta["dataset"]
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"{predictions}: its metadata has no {error}: not a prediction file this version reads"
        ) from None


def _fold_images(study: _Study, held: np.ndarray) -> dict[str, Any]:
    """How many images a fold holds out and the digest of their ids."""
    return {"fold_images": int(held.sum()), "fold_image_ids_sha256": _digest(study.ids[held].tolist())}


def _fitted(
    directory: Path, layout: Any, where: dict[str, str], study: _Study, name: str, budget: int, fold: int | None
) -> tuple[Any, np.ndarray | None, list[dict[str, Any]]]:
    """The policy refitted on every image (with the transfer rows it reproduces), or fold ``fold``'s with the
    images it holds out; each checked against the fit the policies documents record."""
    if fold is not None:
        return *_fold(study, fold), []
    policy = fit(study.views, study.budgets, study.settings.selector_rows, study.settings.seed)
    if study.document.get("fitted"):
        _fold(study, 0)  # the config's settings still give the policies job's fits
    return policy, None, _transferred(directory, layout, where, study, policy, name, budget)


def _calibration(study: _Study, ids: np.ndarray, recorded: dict[str, str]) -> dict[str, Any]:
    """What a policy was fitted on: its images (``ids``), the prediction file and the policies settings."""
    return {
        "n_images": len(ids),
        "image_ids_sha256": _digest(ids.tolist()),
        "predictions": recorded["path"],
        "predictions_sha256": recorded["sha256"],
        "budgets": study.budgets,
        "seed": study.settings.seed,
        "selector_rows": study.settings.selector_rows,
    }


def export_policy(
    directory: Path,
    layout: Any,
    scored: str,
    variant: str,
    model: str,
    name: str,
    budget: int,
    settings: PoliciesConfig,
    fold: int | None = None,
) -> dict[str, Any]:
    """The policy file's document (:data:`zoomeval.policy.document.POLICY`, checked as its readers check it) of
    policy ``name`` at ``budget`` for ``model`` on ``scored``/``variant``: fitted on every image, or with ``fold``
    cross-validation fold ``fold``'s own policy."""
    if name not in RULES:
        raise ValueError(f"--policy: {name!r} is none of {', '.join(RULES)}")
    where = {"scored": scored, "variant": variant, "model": model}
    study, recorded = _study(directory, layout, where, settings)
    if budget not in study.budgets:
        raise ValueError(f"--budget: {budget} is none of the study's budgets {study.budgets}")
    policy, held, transferred = _fitted(directory, layout, where, study, name, budget, fold)
    rule, chosen = _rule(name, budget, policy)
    model_key, dataset = _model_and_dataset(directory / recorded["path"])
    calibration = study.ids if held is None else study.ids[~held]
    row = _held_row(study.document, name, budget)
    # the row is every fold's; a fold's file also names its own held-out images
    fold_images = {} if held is None else {"fold": fold, **_fold_images(study, held)}
    document = POLICY.document(
        {
            "policy": name,
            "budget": budget,
            "views": [[study.views.order[t].scale, study.views.order[t].row, study.views.order[t].col] for t in chosen],
            "rule": rule,
            "model": model_key,
            "fitted_on": {"dataset": dataset, **where, "fold": fold, **_calibration(study, calibration, recorded)},
            "held_out": None if row is None else {**row, **fold_images},
            "transferred": transferred,
        }
    )
    document = json.loads(json.dumps(document))  # what the file holds (tuples as lists)
    # read as every reader reads it: an export is refused where they would refuse what it writes
    POLICY.upgraded(document, f"{name} policy exported from {directory}")
    return document
