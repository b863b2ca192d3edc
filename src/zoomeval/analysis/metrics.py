"""The typed metrics of one scored prediction file (one row of Table A8 and what the other tables and figures
need), and ``metrics.json`` / ``cover.json``, the files that carry them from the analysis to the report."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from zoomeval.core.io import read_json, write_json
from zoomeval.core.layout import declare
from zoomeval.core.left_out import LeftOut
from zoomeval.core.zoom import Transform

#: Version of the metrics.json and cover.json layout. 2: ``acc_top36`` renamed ``acc_top_k``; 3: ``acc_standard``
#: added (also per origin); 4: ``left_out`` added; 5: ``inputs`` (the files read, with their sha256) and ``key`` (the
#: comparability key, :mod:`zoomeval.analysis.comparability`) added; 6: the key's ``cover_node_limit`` and
#: cover.json's exact-cover ``node_limit``, ``nodes``, ``time_limit`` and ``solver`` added, its status ``time_limit``
#: replaced by ``node_limit`` (a work limit: the same cover on any machine). Older versions are still read, without
#: what they lack.
METRICS_SCHEMA_VERSION = 6
declare("metrics", schema_version=METRICS_SCHEMA_VERSION)


@dataclass(frozen=True, kw_only=True)
class Scores:
    """The numbers of one correctness matrix (accuracies in percent; ``None`` where undefined)."""

    n_images: int
    #: the 1-crop transform alone (None where it is not among the transforms)
    acc_1crop: float | None
    #: union of the first top_k greedy picks
    acc_top_k: float
    #: union of every transform
    acc_max: float
    #: the greedy cover (the paper's), the minimum cover (HiGHS; at its node limit the best cover found, or the
    #: greedy one when that is no better) and greedy - exact
    cover_size: int
    cover_size_exact: int
    cover_gap: int
    #: zoom-in/-out/-224 upper bounds within the greedy cover and exclusive shares
    #: (:func:`zoomeval.analysis.cover_breakdown.zoom_groups`)
    zoom_groups: dict[str, float]
    #: share (%) of the first top_k greedy picks at the centre anchor (None for an empty cover)
    top_k_centre_share: float | None


@dataclass(frozen=True, kw_only=True)
class Metrics(Scores):
    """One row of Table A8 and what the other tables and figures need (``metrics.json``)."""

    model: str
    variant: str
    #: the scored name: the dataset, suffixed for label sets other than its own labels
    dataset: str
    #: transforms searched (9 x scales) and classes a random guess picks from (Table 1's "Random" rows)
    n_transforms: int
    n_classes: int
    #: images of the dataset left out as bad (listed in its bad_images.csv)
    n_excluded: int
    #: per source dataset where the images come from several (ImageNet-Hard): n_images, acc_1crop, acc_max
    by_origin: dict[str, dict[str, float | int | None]] | None
    #: top-1 accuracy (%) per aggregation method and rule
    #: (:func:`zoomeval.analysis.aggregation_scores.aggregation_accuracy`)
    aggregation: dict[str, dict[str, float]] | None
    #: greedy picks behind acc_top_k and top_k_centre_share
    top_k: int
    #: top-1 accuracy (%) of the standard evaluation (the model's own transform, one view per image; original
    #: images only, else None)
    acc_standard: float | None = None
    #: the dataset's images left out as bad (by kind) and those the label set does not score (None: not known)
    left_out: LeftOut | None = None
    #: the files read, by role (``predictions``, ``standard``): ``{"path", "sha256"}`` (None: not known)
    inputs: dict[str, dict[str, str] | None] | None = None
    #: the comparability key (:func:`zoomeval.analysis.comparability.comparability_key`; None: not known)
    key: dict[str, Any] | None = None


#: Column order of metrics.json (the order of the version 1 files, acc_top_k in acc_top36's place).
METRICS_KEYS = (
    "model",
    "variant",
    "dataset",
    "n_images",
    "acc_1crop",
    "acc_top_k",
    "acc_max",
    "cover_size",
    "cover_size_exact",
    "cover_gap",
    "zoom_groups",
    "top_k_centre_share",
    "n_transforms",
    "n_classes",
    "n_excluded",
    "by_origin",
    "aggregation",
    "top_k",
    "acc_standard",
    "left_out",
    "inputs",
    "key",
)
#: Keys added by a schema version, with the value that stands in for them in older files.
ADDED_KEYS = {3: {"acc_standard": None}, 4: {"left_out": None}, 5: {"inputs": None, "key": None}}


def metrics_document(metrics: Metrics) -> dict[str, Any]:
    """metrics.json: the schema version, then the metrics in :data:`METRICS_KEYS` order."""
    values = asdict(metrics)
    return {"schema_version": METRICS_SCHEMA_VERSION, **{key: values[key] for key in METRICS_KEYS}}


def write_metrics(
    metrics: Metrics, cover: dict[str, Any], metrics_path: str | os.PathLike[str], cover_path: str | os.PathLike[str]
) -> None:
    """Save metrics.json and cover.json (the metrics followed by the cover document)."""
    document = metrics_document(metrics)
    write_json(cover_path, {**document, **cover})
    write_json(metrics_path, document)


#: Fields checked on reading, by expected form: counts, percentages (None allowed where marked) and names.
COUNTS = ("n_images", "cover_size", "cover_size_exact", "cover_gap", "n_transforms", "n_classes", "n_excluded", "top_k")
PERCENTAGES = {
    "acc_1crop": True,
    "acc_top_k": False,
    "acc_max": False,
    "acc_standard": True,
    "top_k_centre_share": True,
}
NAMES = ("model", "variant", "dataset")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_document(document: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Refuse a metrics document (of the current version) whose fields do not have their form, naming the file, the
    field and the form."""
    for name in COUNTS:
        value = document[name]
        if not (_is_number(value) and isinstance(value, int) and value >= 0):
            raise ValueError(f"{path}: {name} is {value!r}; expected a whole number >= 0")
    for name, nullable in PERCENTAGES.items():
        value = document[name]
        if not ((value is None and nullable) or (_is_number(value) and 0 <= value <= 100)):
            raise ValueError(
                f"{path}: {name} is {value!r}; expected a number from 0 to 100" + (" or null" if nullable else "")
            )
    for name in NAMES:
        if not isinstance(document[name], str):
            raise ValueError(f"{path}: {name} is {document[name]!r}; expected a string")
    if not document["cover_size_exact"] <= document["cover_size"] <= document["n_transforms"]:
        raise ValueError(
            f"{path}: cover sizes {document['cover_size_exact']} (exact) and {document['cover_size']} "
            f"(greedy); expected exact <= greedy <= n_transforms ({document['n_transforms']})"
        )


def read_metrics(path: str | os.PathLike[str]) -> Metrics:
    """The metrics in a metrics.json (or cover.json) of any schema version so far; refuses anything else, naming the
    file, the field and its expected form."""
    document = read_json(path)
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a metrics document (a JSON object); re-run the analysis")
    version = document.pop("schema_version", 1)
    if version == 1 and "acc_top36" in document:
        document["acc_top_k"] = document.pop("acc_top36")
    if version not in range(1, METRICS_SCHEMA_VERSION + 1):
        raise ValueError(
            f"{path}: metrics schema_version {version!r} is not one this zoomeval reads "
            f"(1 to {METRICS_SCHEMA_VERSION}); upgrade zoomeval or re-run the analysis"
        )
    for added, defaults in ADDED_KEYS.items():
        if version < added:
            document = {**defaults, **document}
    missing = sorted(set(METRICS_KEYS) - document.keys())
    if missing:
        raise ValueError(f"{path}: no {missing}; re-run the analysis (snakemake --forcerun analyze)")
    check_document(document, path)
    if document["left_out"] is not None:
        document["left_out"] = LeftOut.from_document(document["left_out"])
    return Metrics(**{key: document[key] for key in METRICS_KEYS})


def read_greedy(path: str | os.PathLike[str]) -> list[Transform]:
    """The greedy cover's transforms in pick order, from a cover.json."""
    return [Transform(p["scale"], p["row"], p["col"]) for p in read_json(path)["greedy"]]
