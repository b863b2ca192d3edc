"""Run one model over every zoom transform of every image of one dataset variant.

Each image is decoded once in a DataLoader worker, resized once per scale and cut nine times
(:mod:`zoomeval.inference.crops`); the main process batches uint8 crops across images, moves them to the
device (pinned memory on CUDA), normalises them there and keeps the argmax, the argmax over the
dataset's class set and its softmax probability (:mod:`zoomeval.inference.classifier`), and sums the softmax
vectors for the aggregation methods (:mod:`zoomeval.inference.aggregation`).

Results are written in shards of ``shard_images`` images that a rerun reuses (:mod:`zoomeval.inference.shards`).
Before any work the job refuses images that would exceed the pixel budget at the largest scale (the
manifest step leaves them out, :mod:`zoomeval.core.images`); during it, non-finite logits (fp16 overflow, a
normalisation that overflows) stop the job naming the model, the precision and the first image affected.
Each job writes two files: the predictions (a row per image and transform, :mod:`zoomeval.inference.tables`)
and the aggregates (a row per image and aggregation method).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader

from zoomeval import __version__
from zoomeval.core.config import MAX_RESIZED_PIXELS, InferenceSettings, ModelSpec
from zoomeval.core.images import too_large
from zoomeval.core.manifest import Record
from zoomeval.core.provenance import workflow_commit
from zoomeval.core.zoom import Transform, transforms
from zoomeval.inference.aggregation import FIELDS as AGGREGATES_FIELDS
from zoomeval.inference.aggregation import SCHEMA_VERSION as AGGREGATES_SCHEMA_VERSION
from zoomeval.inference.aggregation import MeanSoftmax, aggregate, membership
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crops import DEVICE_BACKEND, ZoomCrops, batches, on_device
from zoomeval.inference.parts import part_range
from zoomeval.inference.shards import ShardStore
from zoomeval.inference.tables import SCHEMA_VERSION, prediction_schema, prediction_table, write_table

log = logging.getLogger(__name__)

#: Seconds between progress lines in the job's log.
PROGRESS_SECONDS = 10.0


class _Progress:
    """Logs crops done and throughput every :data:`PROGRESS_SECONDS` and at the end."""

    def __init__(self, total: int, views: int) -> None:
        self.total, self.views, self.done = total, views, 0
        self.start = self.last = time.perf_counter()

    def advance(self, crops: int) -> None:
        self.done += crops
        now = time.perf_counter()
        if now - self.last >= PROGRESS_SECONDS or self.done == self.total:
            rate = self.done / (now - self.start)
            log.info("%d/%d crops, %.1f crops/s, %.2f images/s", self.done, self.total, rate, rate / self.views)
            self.last = now


def _loader(classifier: Classifier, dataset: ZoomCrops) -> DataLoader[tuple[int, torch.Tensor]]:
    workers = classifier.settings.num_workers
    return DataLoader(
        dataset,
        batch_size=None,
        num_workers=workers,
        pin_memory=classifier.device.type == "cuda",
        prefetch_factor=2 if workers else None,
    )


def run_shard(
    classifier: Classifier,
    records: Sequence[Record],
    scales: list[int],
    variant: str,
    masks: dict[str, bytes] | None,
    crop_size: int,
) -> tuple[pa.Table, pa.Table, float]:
    """Predictions for ``records`` (image order, then :func:`transforms` order), their aggregates and the
    seconds it took."""
    methods, members = membership(transforms(scales))
    n_t, n_v, n_i = 9 * len(scales), len(members), len(records)
    columns: dict[str, np.ndarray] = {}
    means = MeanSoftmax(n_i, members, len(classifier.subset), classifier.device)
    backend = classifier.settings.resize_backend
    loader = iter(_loader(classifier, ZoomCrops(records, scales, variant, masks, crop_size, backend, True)))
    if backend == DEVICE_BACKEND:
        loader = on_device(loader, classifier.device, scales, crop_size, True)
    progress = _Progress(n_v * n_i, n_v)

    def collect(images: np.ndarray, views: np.ndarray, logits: torch.Tensor, probs: torch.Tensor) -> None:
        def where(k: int) -> str:
            record = records[images[k]]
            return f"image {record.image_id} ({record.path}) under {_view_name(scales, views[k])}"

        classifier.check_finite(logits, where)
        means.add(images, views, probs)
        for name, values in classifier.columns(logits, probs).items():
            if name not in columns:
                columns[name] = np.empty((n_i, n_v, *values.shape[1:]), values.dtype)
            columns[name][images, views] = values
        progress.advance(len(views))

    with torch.inference_mode():
        pending = None
        for images, views, batch in batches(loader, classifier.settings.batch_size):
            logits = classifier.logits(batch)
            # The previous batch's results are copied to the host (which waits for the device) only once this
            # batch is queued, so a GPU never idles while Python prepares the next one.
            if pending is not None:
                collect(*pending)
            pending = (images, views, logits, classifier.probabilities(logits))
        if pending is not None:
            collect(*pending)
    ids = [r.image_id for r in records]
    aggregates = aggregate(ids, methods, members, columns["pred"], columns["conf"], means.sums, classifier.subset)
    predictions = prediction_table(records, scales, {name: values[:, :n_t] for name, values in columns.items()})
    return predictions, aggregates, time.perf_counter() - progress.start


def _view_name(scales: list[int], view: int) -> str:
    order: list[Transform] = transforms(scales)
    if view < len(order):
        return f"transform {order[view].name}"
    return f"extra view {view - len(order)} of the 5-/10-crop methods"


def check_sizes(records: Sequence[Record], dataset: str, max_scale: int, max_pixels: int) -> None:
    """Refuse an empty manifest, or one with an image over the pixel budget at the largest scale."""
    if not records:
        raise ValueError(f"dataset {dataset!r}: the manifest lists no images, so there is nothing to predict")
    for record in records:
        if why := too_large(record.width, record.height, max_scale, max_pixels):
            raise ValueError(
                f"dataset {dataset!r}: image {record.image_id} ({record.path}) is too large: {why}. Its manifest was "
                "built for smaller scales or a larger budget: rebuild it (--forcerun dataset_manifest)"
            )


def model_metadata(classifier: Classifier, spec: ModelSpec) -> dict[str, Any]:
    """What a prediction file records of its model: the entry, the normalisation fed, the weights' sha256 and what
    the source adds (open_clip: the zero-shot head's templates, class-name file sha256 and duplicate-name policy)."""
    return {**asdict(spec), **classifier.normalisation, "weights_sha256": classifier.weights_sha256,
            "param_count": sum(p.numel() for p in classifier.model.parameters()), **classifier.provenance}  # fmt: skip


def prediction_metadata(classifier: Classifier, spec: ModelSpec, scales: list[int], settings: InferenceSettings,
                        class_indices: Sequence[int] | None, **job: Any) -> dict[str, Any]:  # fmt: skip
    """The prediction file's metadata before timing: what its numbers depend on (``job``: dataset, variant,
    n_images)."""
    return {
        "kind": "predictions",
        "schema_version": SCHEMA_VERSION,
        "zoomeval": __version__,
        "torch": torch.__version__,
        "model": model_metadata(classifier, spec),
        "dataset": job["dataset"],
        "variant": job["variant"],
        "scales": scales,
        "crop_size": spec.input_size,
        "resize_backend": settings.resize_backend,
        "precision": settings.precision,
        "compile": settings.compile,
        "channels_last": settings.channels_last,
        "class_set": "full" if class_indices is None else "subset",
        "class_indices": None if class_indices is None else list(class_indices),
        "n_images": job["n_images"],
    }


def _aggregates_metadata(metadata: dict[str, Any], scales: list[int]) -> dict[str, Any]:
    methods, members = membership(transforms(scales))
    views = {m: int(n) for m, n in zip(methods, members.sum(axis=0), strict=True)}
    return {**metadata, "kind": "aggregates", "schema_version": AGGREGATES_SCHEMA_VERSION, "views": views}


def predict_to_file(
    path: str | os.PathLike[str],
    aggregates_path: str | os.PathLike[str],
    records: Sequence[Record],
    spec: ModelSpec,
    scales: list[int],
    settings: InferenceSettings,
    dataset: str,
    variant: str = "original",
    masks: dict[str, bytes] | None = None,
    class_indices: Sequence[int] | None = None,
    max_pixels: int = MAX_RESIZED_PIXELS,
    weights: Path | None = None,
    head: Path | None = None,
    part: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Predict every (image, transform) of ``records`` into the Parquet file ``path`` and the aggregation
    methods' predictions into ``aggregates_path``; returns the predictions' metadata.

    ``class_indices`` is the dataset's class set for ``pred`` (``None``: all 1000 classes); ``max_pixels`` the
    pixel budget of one resized image (``max_resized_pixels``); ``weights`` the folder of the fetched weights;
    ``head`` the zero-shot head of an open_clip model; ``part`` the (index, count) that :func:`predict_part` records
    in the metadata.
    """
    check_sizes(records, dataset, max(scales), max_pixels)
    store = ShardStore(Path(path), Path(aggregates_path))
    with store.locked():
        torch.set_num_threads(settings.threads or os.cpu_count() or 1)
        classifier = Classifier(spec, settings, class_indices, weights, head=head)
        metadata = prediction_metadata(classifier, spec, scales, settings, class_indices, dataset=dataset,
                                       variant=variant, n_images=len(records))  # fmt: skip
        if part is not None:
            metadata["part"] = list(part)
        masks_digest = hashlib.sha256(b"".join(masks[r.image_id] for r in records)).hexdigest() if masks else None
        seconds, computed, size = 0.0, 0, settings.shard_images
        for index, chunk, identity in store.pending(records, size, metadata, masks_digest):
            predictions, aggregates, took = run_shard(classifier, chunk, scales, variant, masks, spec.input_size)
            store.write(index, identity, predictions, aggregates)
            seconds, computed = seconds + took, computed + len(chunk)
        views = len(membership(transforms(scales))[1])
        metadata |= {  # after the shards' identity: a rerun at another commit reuses them
            "zoomeval_commit": workflow_commit(),
            "device": classifier.device.type,
            "seconds": round(seconds, 3),
            "crops_per_second": round(computed * views / seconds, 2) if seconds else None,
        }
        store.finish(-(-len(records) // size), metadata, _aggregates_metadata(metadata, scales))
        return metadata


def predict_part(path: str | os.PathLike[str], aggregates_path: str | os.PathLike[str], records: Sequence[Record],
                 spec: ModelSpec, scales: list[int], settings: InferenceSettings, part: int, parts: int,
                 **job: Any) -> dict[str, Any]:  # fmt: skip
    """Part ``part`` of ``parts`` of :func:`predict_to_file` over the whole manifest's ``records``: its run of
    shards (:func:`zoomeval.inference.parts.part_range`), or empty files where it has none. ``job``: the
    keywords of :func:`predict_to_file` from ``dataset`` on; ``class_indices`` must be the whole manifest's."""
    check_sizes(records, job["dataset"], max(scales), job.get("max_pixels", MAX_RESIZED_PIXELS))
    span = part_range(len(records), settings.shard_images, part, parts)
    if span:
        chunk = records[span.start : span.stop]
        return predict_to_file(path, aggregates_path, chunk, spec, scales, settings, part=(part, parts), **job)
    log.info("part %d of %d has no images: %d images make fewer shards than parts", part, parts, len(records))
    metadata = {"kind": "predictions", "part": [part, parts], "n_images": 0}
    write_table(aggregates_path, pa.schema(AGGREGATES_FIELDS).empty_table(), {**metadata, "kind": "aggregates"})
    write_table(path, prediction_schema(settings.store_top5).empty_table(), metadata)
    return metadata
