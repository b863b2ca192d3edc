"""A study's results read through its index (``results/study.json``) and the layout only, each checked before it is
believed: the metrics file's sha256 against the index, the prediction and standard-evaluation files' sha256
against the metrics file that names them, the comparability key against the predictions' metadata, and (on
request) the metrics recomputed from the predictions. What fails is refused, naming the file and what is wrong.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoomeval.analysis.comparability import comparability_key, key_differences
from zoomeval.analysis.label_sets import scored_name
from zoomeval.analysis.metrics import Metrics, read_metrics
from zoomeval.core.checksums import sha256_file
from zoomeval.core.documents import COUNT, STRING, Field, Form, check_fields
from zoomeval.core.io import NoMetadata, read_metadata
from zoomeval.core.layout import Layout
from zoomeval.core.manifest import Record
from zoomeval.study.index import LAYOUT, Entry, inside, read_index

#: The layout output each input of a metrics file must be.
INPUTS = {"predictions": "predictions", "standard": "standard"}
MODEL_FIELDS = ("name", "architecture", "weights")
#: The prediction metadata a row needs, with the form expected.
META_FIELDS = (
    Field(
        "model",
        Form(
            lambda m: isinstance(m, dict) and all(isinstance(m.get(f), str) for f in MODEL_FIELDS),
            f"an object with the strings {', '.join(MODEL_FIELDS)}",
        ),
    ),
    Field("dataset", STRING),
    Field("variant", STRING),
    Field("crop_size", COUNT),
    Field("zoomeval", STRING),
    Field("precision", STRING),
    Field("resize_backend", STRING),
    Field("torch", STRING),
    Field(
        "scales",
        Form(
            lambda s: isinstance(s, list) and bool(s) and all(type(x) is int and x > 0 for x in s),
            "a list of whole numbers > 0",
        ),
    ),
)


@dataclass(frozen=True)
class Result:
    """One verified result of a study."""

    entry: Entry
    metrics: Metrics
    #: the prediction file's metadata and the standard evaluation's geometry (empty without one)
    meta: dict[str, Any]
    geometry: dict[str, Any]
    #: the files read, by role (``predictions``, ``standard``), and the metrics file's sha256
    inputs: dict[str, Path]


def read_study(directory: Path, layout: Layout = LAYOUT) -> tuple[list[Result], list[str]]:
    """The verified results of a study, and one line per result that cannot be trusted (missing, stale, tampered or
    malformed), naming its file and what is wrong."""
    try:
        entries = read_index(directory, layout)
    except ValueError as exc:
        return [], [str(exc)]
    results, problems = [], []
    for entry in entries:
        try:
            results.append(check_entry(directory, entry, layout))
        except ValueError as exc:
            problems.append(str(exc))
    return results, problems


def file_sha256(path: Path) -> str:
    """``path``'s sha256, each distinct file hashed once however many results name it (the manifest, a standard
    evaluation every label set reads): keyed by the file's identity and stamp, so a changed file is hashed again."""
    stat = path.stat()
    return _hashed(str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1 << 16)
def _hashed(path: str, inode: int, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def check_file(path: Path, sha256: str, what: str) -> None:
    """Refuse ``path`` if it is missing or its content is not the one whose sha256 ``what`` recorded."""
    if not path.is_file():
        raise ValueError(f"{path}: missing, though {what} lists it; run the study's workflow to the end")
    actual = file_sha256(path)
    if actual != sha256:
        raise ValueError(
            f"{path}: changed since {what} recorded it (sha256 {actual[:12]}, not {sha256[:12]}): stale "
            "or tampered; run the study's workflow to the end to recompute and reseal it"
        )


def layout_file(directory: Path, name: str, path: Any, where: str, layout: Layout) -> Path:
    """``directory/path`` if ``path`` is the study's output ``name`` by the layout; refused otherwise."""
    wildcards = layout.parse(name, path) if isinstance(path, str) and not os.path.isabs(path) else None
    if wildcards is None or {".", ".."} & set(wildcards.values()):
        raise ValueError(f"{where} is {path!r}; expected a path {layout.path(name)}")
    return inside(directory, path, where, layout)


def check_entry(directory: Path, entry: Entry, layout: Layout = LAYOUT) -> Result:
    """One result of the index, verified (see the module's docstring)."""
    index = directory / layout.path("study_index")
    path = directory / entry.path
    check_file(path, entry.sha256, str(index))
    metrics = read_metrics(path)
    if metrics.key != entry.key:
        raise ValueError(f"{path}: its comparability key is not the one {index} records; re-run the workflow")
    _check_names(path, entry, metrics, layout)
    inputs = _inputs(directory, path, metrics, layout)
    meta = checked_prediction_metadata(inputs["predictions"])
    _check_key(path, metrics, meta)
    _check_counts(path, metrics, meta, inputs)
    standard = inputs.get("standard")
    geometry = (zoomeval_metadata(standard).get("geometry") if standard else None) or {}
    if not isinstance(geometry, dict):
        raise ValueError(f"{standard}: metadata field geometry is {geometry!r}; expected an object")
    return Result(entry, metrics, meta, geometry, inputs)


def _check_counts(path: Path, metrics: Metrics, meta: dict[str, Any], inputs: dict[str, Path]) -> None:
    """The counts readable for free: the metrics' images within the predictions' (their metadata), and each Parquet
    file's row count (its footer) the images times the views its metadata gives: a file cut by a row, then resealed
    with every sha256 rewritten, is refused here (a row changed in place is not: ``--verify``, ``zoomeval audit``)."""
    import pyarrow.parquet as pq

    from zoomeval.core.zoom import ZoomGrid

    n_images = meta.get("n_images")
    if not isinstance(n_images, int) or isinstance(n_images, bool) or n_images < 0:
        raise ValueError(f"{inputs['predictions']}: metadata field n_images is {n_images!r}; expected a whole number")
    if metrics.n_images > n_images:
        raise ValueError(
            f"{path}: n_images {metrics.n_images} is more than the {n_images} images of "
            f"{inputs['predictions']}; expected at most that"
        )
    views = {"predictions": ZoomGrid(meta["scales"]).n_transforms, "standard": 1}
    for role, file in inputs.items():
        images = n_images if role == "predictions" else zoomeval_metadata(file).get("n_images", n_images)
        rows = pq.read_metadata(file).num_rows
        if rows != images * views[role]:
            raise ValueError(
                f"{file}: {rows} rows, not the {images} images x {views[role]} views its metadata "
                "gives: cut or padded since it was written; re-run its job"
            )


def _inputs(directory: Path, path: Path, metrics: Metrics, layout: Layout) -> dict[str, Path]:
    """The files ``metrics`` was computed from, each checked against the sha256 it records."""
    recorded = metrics.inputs
    if not isinstance(recorded, dict) or not isinstance(recorded.get("predictions"), dict):
        raise ValueError(
            f"{path}: inputs is {recorded!r}; expected the files it was computed from (metrics "
            "schema_version 5): re-run its analysis"
        )
    out = {}
    for role, name in INPUTS.items():
        item = recorded.get(role)
        if item is None:
            continue
        if not isinstance(item, dict):
            raise ValueError(f"{path}: inputs.{role} is {item!r}; expected an object with path and sha256")
        file = layout_file(directory, name, item.get("path"), f"{path}: inputs.{role}.path", layout)
        check_file(file, str(item.get("sha256")), f"{path}, computed from it,")
        out[role] = file
    return out


def zoomeval_metadata(path: Path) -> dict[str, Any]:
    """The zoomeval metadata of a Parquet file, refused (naming the file) where there is none."""
    try:
        meta = read_metadata(path)
    except NoMetadata:
        raise
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise ValueError(f"{path}: not a Parquet file with zoomeval metadata ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: its zoomeval metadata is a {type(meta).__name__}; expected an object")
    return meta


def checked_prediction_metadata(path: Path) -> dict[str, Any]:
    """A prediction file's metadata, refused unless it has what a row needs in the form expected."""
    meta = zoomeval_metadata(path)
    check_fields(meta, META_FIELDS, str(path), "metadata field ")
    count = meta["model"].get("param_count")
    if count is not None and (type(count) is not int or count < 0):
        raise ValueError(f"{path}: metadata field model.param_count is {count!r}; expected a whole number")
    return meta


def _check_names(path: Path, entry: Entry, metrics: Metrics, layout: Layout) -> None:
    """The metrics file's place in the layout must be the one its key and metrics give."""
    key, wildcards = entry.key, layout.parse("metrics", entry.path) or {}
    try:
        scored = scored_name(str(key.get("dataset")), str(key.get("label_set")))
    except ValueError as exc:
        raise ValueError(f"{path}: key field label_set: {exc}") from None
    expected = {"scored": scored, "variant": key.get("variant"), "model": metrics.model}
    if wildcards != expected or metrics.dataset != scored or metrics.variant != key.get("variant"):
        raise ValueError(
            f"{path}: holds the metrics of {metrics.dataset}/{metrics.variant}/{metrics.model} (key: "
            f"{scored}/{key.get('variant')}); expected them at {layout.path('metrics', **expected)}"
        )


def _check_key(path: Path, metrics: Metrics, meta: dict[str, Any]) -> None:
    """The recorded key must be the one the predictions' metadata gives (with the recorded images and label set)."""
    key = metrics.key or {}
    expected = comparability_key(
        meta,
        key.get("images"),
        key.get("label_set"),
        metrics.top_k,  # type: ignore[arg-type]
        key.get("cover_node_limit"),
    )
    differences = key_differences(key, expected)
    if differences:
        raise ValueError(
            f"{path}: key field {differences[0]}, the value its predictions' metadata gives; re-run its analysis"
        )


def same_number(a: float | None, b: float | None) -> bool:
    """Equal, allowing for the rounding of a float written to JSON and read back."""
    return a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9))


#: The numbers ``--verify`` recomputes from the predictions.
VERIFIED = ("n_images", "acc_1crop", "acc_top_k", "acc_max", "cover_size", "acc_standard")


def scored_records(directory: Path, key: dict[str, Any], layout: Layout = LAYOUT) -> list[Record]:
    """The records a result scored: its dataset's manifest under its label set (with the set's labels file), refused
    unless they are the images and labels its key's ``images`` digest sealed (a relabelled manifest would change
    every number read from it: the timm format's top-5, ``--verify``)."""
    from zoomeval.analysis.comparability import images_digest
    from zoomeval.analysis.label_sets import LABEL_SETS, relabel
    from zoomeval.core.manifest import read_manifest

    labels_file = LABEL_SETS[key["label_set"]].labels_file
    labels = directory / layout.path("labels", dataset=key["dataset"], labels_file=labels_file) if labels_file else None
    manifest = inside(directory, layout.path("manifest", dataset=key["dataset"]), "the manifest", layout)
    records = relabel(read_manifest(manifest), key["label_set"], labels)
    if images_digest(records) != key["images"]:
        with_labels = f" with {labels}" if labels else ""
        raise ValueError(
            f"{manifest}: its images and labels{with_labels} are not the ones the key field images "
            f"sealed (sha256 {str(key['images'])[:12]}): relabelled or rebuilt since; re-run the study "
            "to the end"
        )
    return records


def verify(directory: Path, result: Result, layout: Layout = LAYOUT) -> None:
    """Recompute a result's numbers from its predictions (1-crop, upper bounds, greedy cover, standard accuracy)
    with the analysis's own functions; refuse any difference, naming the file and the field."""
    import polars as pl

    from zoomeval.analysis.cover import greedy_cover
    from zoomeval.analysis.matrix import correctness_matrix
    from zoomeval.analysis.scoring import greedy_scores
    from zoomeval.analysis.standard_scores import standard_correct
    from zoomeval.core.zoom import ZoomGrid

    key, metrics, path = result.entry.key, result.metrics, directory / result.entry.path
    records = scored_records(directory, key, layout)
    order = list(ZoomGrid(result.meta["scales"]).transforms)
    matrix = correctness_matrix(result.inputs["predictions"], records, order)
    scores = greedy_scores(matrix, order, [p.index for p in greedy_cover(matrix)], metrics.top_k)
    standard = result.inputs.get("standard")
    correct = None if standard is None else standard_correct(pl.read_parquet(standard), records)
    scores["acc_standard"] = None if correct is None or not len(correct) else 100 * float(correct.mean())
    for field in VERIFIED:
        if not same_number(getattr(metrics, field), scores[field]):
            raise ValueError(
                f"{path}: {field} is {_shown(getattr(metrics, field))}, but {_shown(scores[field])} "
                f"recomputed from {result.inputs['predictions']}; re-run its analysis"
            )


def _shown(value: float | None) -> str:
    return "null" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
