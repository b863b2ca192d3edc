"""Honest evaluation of the label-free zoom policies (:mod:`zoomeval.analysis.policies`): seeded k-fold
cross-validation over images, or transfer (fit on every image of one dataset, score every image of another), with a
95 % interval over images for every number; and the in-sample references on the same axes (1-crop, 5-/10-crop, the
oracle top-k cover, acc_max). One job's result is a JSON document (:func:`policies_document`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from zoomeval.analysis.cover import greedy_cover
from zoomeval.analysis.matrix import PredictionRows, read_matrix, read_matrix_index
from zoomeval.analysis.metrics import Metrics, Scored
from zoomeval.analysis.policies import Policy, Views, apply, fit, start_view
from zoomeval.analysis.policy_choices import SCHEMA, choices_table
from zoomeval.analysis.stats import wilson_interval
from zoomeval.core.config import PoliciesConfig
from zoomeval.core.documents import LIST, PERCENT, STRING, Document, Field, fields_of, nullable
from zoomeval.core.layout import declare

#: Version of the policies document and of results/table_zoom_policies.csv (2: the paired comparison with the 1-crop).
SCHEMA_VERSION = 2
#: The policies job's document: what was scored (the target's metrics), the rows (:func:`row`), then the seed, the
#: folds (cross-validation only), the fitted policies (:func:`policy_record`) and why none was fitted (where so).
POLICIES_DOCUMENT = Document(
    "zoom policies",
    SCHEMA_VERSION,
    (
        *fields_of(Scored),
        Field("protocol", STRING),
        Field("acc_1crop", nullable(PERCENT)),
        Field("acc_max", PERCENT),
        Field("left_out"),
        Field("rows", LIST),
        Field("seed"),
        Field("folds", LIST, required=False),
        Field("fitted", LIST),
        Field("not_fitted", STRING, required=False),
    ),
    "re-run the zoom_policies jobs",
    kind="zoom_policies",
)
declare("policies", schema_version=SCHEMA_VERSION)
declare("policy_transfer", schema_version=SCHEMA_VERSION)
#: Forward passes per image of the aggregation methods the table shows beside the policies.
AGGREGATION_PASSES = {"five_crop": 5, "ten_crop": 10}
Z95 = 1.959963984540054
#: The fewest images cross-validation can hold out from (one to calibrate on, one to score).
MIN_CV_IMAGES = 2
Choices = Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]]


def read_views(
    matrix_path: str | os.PathLike[str], predictions_path: str | os.PathLike[str]
) -> tuple[Views, list[str]]:
    """The views of a scored prediction file and its image ids: ``correct`` from its correctness matrix (the label
    set it was scored under), ``pred`` and ``conf`` read once from the predictions."""
    matrix, order, image_ids = read_matrix(matrix_path)
    columns = PredictionRows(predictions_path, image_ids, order).columns(["pred", "conf"])
    return Views(columns["pred"], columns["conf"], np.ascontiguousarray(matrix.T), order), image_ids


def budgets_for(budgets: Sequence[int], n_transforms: int) -> list[int]:
    """The configured budgets up to the number of transforms, and that number (every view)."""
    return sorted({b for b in budgets if b <= n_transforms} | {n_transforms})


def assign_folds(n_images: int, n_folds: int, seed: int) -> np.ndarray:
    """Each image's fold, ``0 .. min(n_folds, n_images) - 1``: a seeded permutation dealt out in turn, so fold sizes
    differ by at most one."""
    if n_images < MIN_CV_IMAGES:
        raise ValueError(f"cross-validation needs at least {MIN_CV_IMAGES} images, got {n_images}")
    folds = np.empty(n_images, dtype=np.int64)
    folds[np.random.default_rng(seed).permutation(n_images)] = np.arange(n_images) % min(n_folds, n_images)
    return folds


def fold_fit(views: Views, folds: np.ndarray, fold: int, budgets: Sequence[int], max_rows: int, seed: int) -> Policy:
    """Fold ``fold``'s policy (``folds``: each image's, :func:`assign_folds`): fitted on the other folds' images."""
    return fit(views.subset(np.flatnonzero(folds != fold)), budgets, max_rows, seed)


def cross_validate(
    views: Views, budgets: Sequence[int], n_folds: int, seed: int, max_rows: int
) -> tuple[Choices, np.ndarray, list[Policy]]:
    """Each image's choices when its fold is the test set and the others calibrate, the folds and each fold's
    fitted policy."""
    folds = assign_folds(views.n_images, n_folds, seed)
    out: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    fitted = []
    for fold in range(int(folds.max()) + 1):
        test = np.flatnonzero(folds == fold)
        policy = fold_fit(views, folds, fold, budgets, max_rows, seed)
        fitted.append(policy)
        for key, (view, passes) in apply(policy, views.subset(test).unlabelled(), budgets).items():
            chosen, spent = out.setdefault(key, (np.zeros(views.n_images, np.int64), np.zeros(views.n_images)))
            chosen[test], spent[test] = view, passes
    return out, folds, fitted


def transfer(source: Views, target: Views, budgets: Sequence[int], seed: int, max_rows: int) -> tuple[Choices, Policy]:
    """The choices on every ``target`` image of the policy fitted on every ``source`` image; the target's labels are
    not passed to the fit nor to the choice."""
    policy = fit(source, budgets, max_rows, seed)
    return apply(policy, target.unlabelled(), budgets), policy


def paired(one_crop: np.ndarray, right: np.ndarray) -> dict[str, Any]:
    """The paired comparison of a point with the 1-crop view on the same images (each image's correctness under
    both): the images it turns right -> wrong and wrong -> right, and the exact two-sided McNemar p-value (the
    binomial test of the discordant pairs at 1/2; 1.0 where there are none)."""
    from scipy.stats import binomtest

    lost = int(np.count_nonzero(one_crop & ~right))
    gained = int(np.count_nonzero(~one_crop & right))
    p = float(binomtest(gained, lost + gained, 0.5).pvalue) if lost + gained else 1.0
    return {"n_right_to_wrong": lost, "n_wrong_to_right": gained, "mcnemar_p": p}


#: The paired columns of a point scored without each image's correctness (the 5-/10-crop rules, MEMO).
UNPAIRED = dict.fromkeys(("n_right_to_wrong", "n_wrong_to_right", "mcnemar_p"))


def row(
    policy: str, budget: int, hits: int, n: int, passes: np.ndarray, pair: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One point of ``n`` images, ``hits`` of them right: accuracy (%) with its Wilson 95 % interval, the mean
    forward passes per image (``passes``: each image's) with a normal 95 % interval of the mean, and ``pair`` (by
    :func:`paired`; empty where the point has no per-image correctness)."""
    lo, hi = wilson_interval(hits, n)
    mean = float(passes.mean())
    half = Z95 * float(passes.std(ddof=1)) / np.sqrt(n) if n > 1 else 0.0
    return {
        "policy": policy,
        "budget": budget,
        "passes": mean,
        "passes_lo": mean - half,
        "passes_hi": mean + half,
        "n_images": n,
        "n_correct": hits,
        "acc": 100 * hits / n,
        "acc_lo": 100 * lo,
        "acc_hi": 100 * hi,
        **(pair or UNPAIRED),
    }


def policy_rows(choices: Choices, correct: np.ndarray, start: int) -> list[dict[str, Any]]:
    """A row per (policy, budget): whether each image's chosen view is right (``correct``: the labels, read only
    here, after every choice is made), paired with the 1-crop view (transform ``start``) on the same images."""
    images = np.arange(correct.shape[0])
    out = []
    for (name, b), (view, passes) in choices.items():
        right = correct[images, view]
        out.append(
            row(
                name,
                b,
                int(right.sum()),
                len(images),
                np.asarray(passes, dtype=float),
                paired(correct[:, start], right),
            )
        )
    return out


def reference_rows(views: Views, budgets: Sequence[int], metrics: Metrics) -> list[dict[str, Any]]:
    """The in-sample references on the policies' axes: the 1-crop view, the union of the first k greedy-cover picks
    (``oracle_top_k``: the labels of the very images scored pick them), every view (``oracle_max``), and the 5- and
    10-crop methods' max and mean rules (from ``metrics``, where the analysis scored them)."""
    correct, n, n_t = views.correct, views.n_images, len(views.order)
    picks = [p.index for p in greedy_cover(correct.T)]
    one_crop = correct[:, start_view(views.order)]

    def fixed(policy: str, budget: int, right: np.ndarray, passes: int) -> dict[str, Any]:
        return row(policy, budget, int(right.sum()), n, np.full(n, float(passes)), paired(one_crop, right))

    rows = [fixed("one_crop", 1, one_crop, 1)]
    rows += [fixed("oracle_top_k", b, correct[:, picks[:b]].any(axis=1), b) for b in budgets]
    rows.append(fixed("oracle_max", n_t, correct.any(axis=1), n_t))
    for method, passes in AGGREGATION_PASSES.items():
        for rule, acc in (metrics.aggregation or {}).get(method, {}).items():
            rows.append(row(f"{method}_{rule}", passes, round(acc * n / 100), n, np.full(n, float(passes))))
    return rows


def policy_record(policy: Policy, views: Views, **extra: Any) -> dict[str, Any]:
    """A fitted policy as the document records it: transforms by name; ``tau`` null where a cascade never stops
    early."""
    names = [t.name for t in views.order]
    return {
        **extra,
        **{key: [names[t] for t in getattr(policy, key)] for key in ("max_conf", "cover", "vote")},
        "cascade": {
            str(b): {"tau": None if np.isinf(tau) else tau, "length": length}
            for b, (tau, length) in policy.cascade.items()
        },
        "selector": {str(b): vars(s) for b, s in policy.selector.items()},
    }


def policies_document(metrics: Metrics, protocol: str, rows: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The policies job's JSON document (:data:`POLICIES_DOCUMENT`): what was scored (the target's metrics), the
    rows, then ``extra`` (the seed, folds and fitted policies)."""
    scored = {field.name: getattr(metrics, field.name) for field in fields_of(Scored)}
    left = None if metrics.left_out is None else metrics.left_out.document()
    return POLICIES_DOCUMENT.document(
        {
            **scored,
            "protocol": protocol,
            "acc_1crop": metrics.acc_1crop,
            "acc_max": metrics.acc_max,
            "left_out": left,
            "rows": rows,
            **extra,
        }
    )


def cv_document(
    matrix_path: str | os.PathLike[str],
    predictions_path: str | os.PathLike[str],
    metrics: Metrics,
    settings: PoliciesConfig,
) -> dict[str, Any]:
    """The document of :func:`cv_outputs`."""
    return cv_outputs(matrix_path, predictions_path, metrics, settings)[0]


def cv_outputs(
    matrix_path: str | os.PathLike[str],
    predictions_path: str | os.PathLike[str],
    metrics: Metrics,
    settings: PoliciesConfig,
) -> tuple[dict[str, Any], pa.Table]:
    """The cross-validated policies of one scored prediction file, its references, folds and fitted policies, and
    each image's held-out choices (:mod:`zoomeval.analysis.policy_choices`). With fewer than :data:`MIN_CV_IMAGES`
    images only the references and no choice: ``not_fitted`` says why, and the table lists the policies as left out
    (rather than failing ``all`` after every prediction is made)."""
    views, image_ids = read_views(matrix_path, predictions_path)
    budgets = budgets_for(settings.budgets, len(views.order))
    if views.n_images < MIN_CV_IMAGES:
        why = f"cross-validation needs at least {MIN_CV_IMAGES} images, got {views.n_images}"
        return policies_document(
            metrics,
            f"cv{settings.folds}",
            reference_rows(views, budgets, metrics),
            seed=settings.seed,
            folds=[],
            fitted=[],
            not_fitted=why,
        ), SCHEMA.empty_table()
    choices, folds, fitted = cross_validate(views, budgets, settings.folds, settings.seed, settings.selector_rows)
    rows = policy_rows(choices, views.correct, start_view(views.order)) + reference_rows(views, budgets, metrics)
    ids = np.asarray(image_ids)
    records = [policy_record(p, views, fold=k, n_calibration=int((folds != k).sum())) for k, p in enumerate(fitted)]
    document = policies_document(
        metrics,
        f"cv{int(folds.max()) + 1}",
        rows,
        seed=settings.seed,
        folds=[ids[folds == k].tolist() for k in range(len(fitted))],
        fitted=records,
    )
    return document, choices_table(choices, views.correct, folds, image_ids, views.order)


def transfer_document(
    source: tuple[str | os.PathLike[str], str | os.PathLike[str]],
    target: tuple[str | os.PathLike[str], str | os.PathLike[str]],
    metrics: Metrics,
    source_name: str,
    settings: PoliciesConfig,
) -> dict[str, Any]:
    """The policies fitted on every image of the ``source`` (correctness matrix, predictions) scored on every image of
    the ``target``, whose labels (its correctness matrix) are read only once the choices are made."""
    source_views, _ = read_views(*source)
    order, image_ids = read_matrix_index(target[0])
    if order != source_views.order:
        raise ValueError(f"{target[0]}: its transforms are not those of {source[0]}; transfer needs the same scales")
    columns = PredictionRows(target[1], image_ids, order).columns(["pred", "conf"])
    budgets = budgets_for(settings.budgets, len(order))
    unlabelled = Views(columns["pred"], columns["conf"], None, order)
    choices, policy = transfer(source_views, unlabelled, budgets, settings.seed, settings.selector_rows)
    matrix, _, _ = read_matrix(target[0])  # the target's labels, once every choice is made
    target_views = Views(columns["pred"], columns["conf"], np.ascontiguousarray(matrix.T), order)
    rows = policy_rows(choices, target_views.correct, start_view(order))
    rows += reference_rows(target_views, budgets, metrics)
    return policies_document(
        metrics,
        f"transfer:{source_name}",
        rows,
        seed=settings.seed,
        fitted=[policy_record(policy, source_views, n_calibration=source_views.n_images)],
    )
