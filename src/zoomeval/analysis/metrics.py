"""The typed metrics of one scored prediction file (one row of Table A8 and what the other tables and figures
need), and ``metrics.json`` / ``cover.json``, the files that carry them from the analysis to the report."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from zoomeval.core.documents import COUNT, LIST, PERCENT, STRING, Document, Field, Upgrade, checked, fields_of, nullable
from zoomeval.core.layout import declare
from zoomeval.core.left_out import LeftOut
from zoomeval.core.zoom import Transform

#: Version of the metrics.json and cover.json layout (what each version changed: :data:`METRICS`' upgrades).
METRICS_SCHEMA_VERSION = 6
declare("metrics", schema_version=METRICS_SCHEMA_VERSION)


@dataclass(frozen=True, kw_only=True)
class Scored:
    """What was scored: the model, its variant and the dataset."""

    model: str = checked(STRING)
    variant: str = checked(STRING)
    #: the scored name: the dataset, suffixed for label sets other than its own labels
    dataset: str = checked(STRING)


@dataclass(frozen=True, kw_only=True)
class Scores:
    """The numbers of one correctness matrix (accuracies in percent; ``None`` where undefined)."""

    n_images: int = checked(COUNT)
    #: the 1-crop transform alone (None where it is not among the transforms)
    acc_1crop: float | None = checked(nullable(PERCENT))
    #: union of the first top_k greedy picks
    acc_top_k: float = checked(PERCENT)
    #: union of every transform
    acc_max: float = checked(PERCENT)
    #: the greedy cover (the paper's), the minimum cover (HiGHS; at its node limit the best cover found, or the
    #: greedy one when that is no better) and greedy - exact
    cover_size: int = checked(COUNT)
    cover_size_exact: int = checked(COUNT)
    cover_gap: int = checked(COUNT)
    #: zoom-in/-out/-224 upper bounds within the greedy cover and exclusive shares
    #: (:func:`zoomeval.analysis.cover_breakdown.zoom_groups`)
    zoom_groups: dict[str, float]
    #: share (%) of the first top_k greedy picks at the centre anchor (None for an empty cover)
    top_k_centre_share: float | None = checked(nullable(PERCENT))


@dataclass(frozen=True, kw_only=True)
class Metrics(Scores, Scored):
    """One row of Table A8 and what the other tables and figures need (``metrics.json``: :class:`Scored`'s fields,
    :class:`Scores`', then these, in order, each with the form a reader checks)."""

    #: transforms searched (9 x scales) and classes a random guess picks from (Table 1's "Random" rows)
    n_transforms: int = checked(COUNT)
    n_classes: int = checked(COUNT)
    #: images of the dataset left out as bad (listed in its bad_images.csv)
    n_excluded: int = checked(COUNT)
    #: per source dataset where the images come from several (ImageNet-Hard): n_images, acc_1crop, acc_max
    by_origin: dict[str, dict[str, float | int | None]] | None
    #: top-1 accuracy (%) per aggregation method and rule
    #: (:func:`zoomeval.analysis.aggregation_scores.aggregation_accuracy`)
    aggregation: dict[str, dict[str, float]] | None
    #: greedy picks behind acc_top_k and top_k_centre_share
    top_k: int = checked(COUNT)
    #: top-1 accuracy (%) of the standard evaluation (the model's own transform, one view per image; original
    #: images only, else None)
    acc_standard: float | None = checked(nullable(PERCENT), default=None)
    #: the dataset's images left out as bad (by kind) and those the label set does not score (None: not known)
    left_out: LeftOut | None = None
    #: the files read, by role (``predictions``, ``standard``): ``{"path", "sha256"}`` (None: not known)
    inputs: dict[str, dict[str, str] | None] | None = None
    #: the comparability key (:func:`zoomeval.analysis.comparability.comparability_key`; None: not known)
    key: dict[str, Any] | None = None


#: metrics.json, its versions and what each changed; older versions are still read, without what they lack.
METRICS = Document(
    "metrics",
    METRICS_SCHEMA_VERSION,
    fields_of(Metrics),
    "re-run the analysis (snakemake --forcerun analyze)",
    upgrades=(
        Upgrade(2, "acc_top36 renamed acc_top_k", renamed={"acc_top36": "acc_top_k"}),
        Upgrade(3, "acc_standard added (also per origin)", added={"acc_standard": None}),
        Upgrade(4, "left_out added", added={"left_out": None}),
        Upgrade(
            5,
            "inputs (the files read, with their sha256) and key (the comparability key, "
            ":mod:`zoomeval.analysis.comparability`) added",
            added={"inputs": None, "key": None},
        ),
        Upgrade(
            6,
            "the key's cover_node_limit and cover.json's exact-cover node_limit, nodes, time_limit and solver added, "
            "its status time_limit replaced by node_limit (a work limit: the same cover on any machine)",
        ),
    ),
    unversioned=1,
)
#: cover.json: metrics.json's fields, then the greedy picks and the exact cover
#: (:func:`zoomeval.analysis.scoring.cover_document`).
COVER = METRICS.with_fields("cover", Field("greedy", LIST), Field("exact"))
#: The fields of metrics.json in order.
METRICS_KEYS = METRICS.names


def metrics_document(metrics: Metrics) -> dict[str, Any]:
    """metrics.json: the schema version, then the metrics in :data:`METRICS_KEYS` order."""
    return METRICS.document(asdict(metrics))


def write_metrics(
    metrics: Metrics, cover: dict[str, Any], metrics_path: str | os.PathLike[str], cover_path: str | os.PathLike[str]
) -> None:
    """Save metrics.json and cover.json (the metrics followed by the cover document)."""
    values = asdict(metrics)
    COVER.write(cover_path, {**values, **cover})
    METRICS.write(metrics_path, values)


def read_metrics(path: str | os.PathLike[str]) -> Metrics:
    """The metrics in a metrics.json (or cover.json) of any schema version so far; refuses anything else, naming the
    file, the field and its expected form."""
    document = METRICS.read(path)
    if not document["cover_size_exact"] <= document["cover_size"] <= document["n_transforms"]:
        raise ValueError(
            f"{path}: cover sizes {document['cover_size_exact']} (exact) and {document['cover_size']} "
            f"(greedy); expected exact <= greedy <= n_transforms ({document['n_transforms']})"
        )
    if document["left_out"] is not None:
        document["left_out"] = LeftOut.from_document(document["left_out"])
    return Metrics(**document)


def read_greedy(path: str | os.PathLike[str]) -> list[Transform]:
    """The greedy cover's transforms in pick order, from a cover.json."""
    return [Transform(p["scale"], p["row"], p["col"]) for p in COVER.read(path)["greedy"]]
