"""Run one model over every zoom transform of every image of one dataset variant.

Each image is decoded once in a DataLoader worker (one per job, for all its shards), resized once per scale and cut nine
times, there or on the device (:mod:`zoomeval.inference.device_resize`); the main process batches uint8 crops across
images, moves them to the device (pinned memory on CUDA), normalises them there and keeps the argmax, the argmax over
the dataset's class set and its softmax probability (:mod:`zoomeval.inference.classifier`), and sums the softmax vectors
for the aggregation methods (:mod:`zoomeval.inference.aggregation`). All of it stays on the device until the end of a
shard, so the loop never waits for a GPU; then the shard's results are copied back once and made into tables and written
in a background thread while the device goes on with the next shard.

Results are written in shards of ``shard_images`` images that a rerun reuses (:mod:`zoomeval.inference.shards`).
Before any work the job refuses images that would exceed the pixel budget at the largest scale (the
manifest step leaves them out, :mod:`zoomeval.core.images`); at the end of each shard, non-finite logits (fp16
overflow, a normalisation that overflows) stop the job naming the model, the precision and the first image affected.
Each job writes two files: the predictions (a row per image and transform, :mod:`zoomeval.inference.tables`)
and the aggregates (a row per image and aggregation method).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader

from zoomeval import __version__
from zoomeval.core.config import MAX_RESIZED_PIXELS, InferenceSettings, ModelSpec
from zoomeval.core.devices import use_threads
from zoomeval.core.images import too_large
from zoomeval.core.manifest import Record
from zoomeval.core.progress import ProgressLog
from zoomeval.core.provenance import source
from zoomeval.core.zoom import ZoomGrid
from zoomeval.inference.aggregation import FIELDS as AGGREGATES_FIELDS
from zoomeval.inference.aggregation import SCHEMA_VERSION as AGGREGATES_SCHEMA_VERSION
from zoomeval.inference.aggregation import MeanSoftmax, aggregate
from zoomeval.inference.auto_backend import measured_stream
from zoomeval.inference.batching import batches
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import AUTO_BACKEND, DEVICE_BACKEND, ZoomCrops, resolve_backend
from zoomeval.inference.device_resize import on_device
from zoomeval.inference.parts import part_range
from zoomeval.inference.shards import ShardStore
from zoomeval.inference.tables import SCHEMA_VERSION, prediction_schema, prediction_table, write_table

log = logging.getLogger(__name__)


def _loader(classifier: Classifier, dataset: ZoomCrops) -> DataLoader[tuple[int, torch.Tensor]]:
    workers = classifier.settings.num_workers
    return DataLoader(
        dataset,
        batch_size=None,
        num_workers=workers,
        pin_memory=classifier.device.type == "cuda",
        prefetch_factor=2 if workers else None,
    )


def crop_stream(
    classifier: Classifier,
    records: Sequence[Record],
    grid: ZoomGrid,
    variant: str,
    masks: dict[str, bytes] | None,
    crop_size: int,
) -> Iterator[tuple[int, torch.Tensor]]:
    """``(index, crops)`` of each of ``records`` in order, from one DataLoader (its workers start once per job, and
    keep decoding across shard boundaries); with the ``device`` backend, cut on the classifier's device; with
    ``auto`` on CUDA, the first images timed on both paths and the rest from a loader of the faster
    (:mod:`zoomeval.inference.auto_backend`)."""
    backend = resolve_backend(classifier.settings.resize_backend, classifier.device)
    dataset = ZoomCrops(records, list(grid.scales), variant, masks, crop_size, backend, extra_views=True)
    if backend == AUTO_BACKEND:
        rest = functools.partial(_stream, classifier)
        return measured_stream(dataset, classifier.device, classifier.settings.num_workers, rest)
    return _stream(classifier, dataset)


def _stream(classifier: Classifier, dataset: ZoomCrops) -> Iterator[tuple[int, torch.Tensor]]:
    stream: Iterator[tuple[int, torch.Tensor]] = iter(_loader(classifier, dataset))
    return on_device(stream, classifier.device) if dataset.backend == DEVICE_BACKEND else stream


@functools.lru_cache(maxsize=4)
def _members(grid: ZoomGrid, device: torch.device) -> torch.Tensor:
    """The grid's :attr:`~zoomeval.core.zoom.ZoomGrid.membership` matrix on ``device``, copied there once per job."""
    return torch.tensor(grid.membership[1], device=device, dtype=torch.float32)


class ShardResults:
    """One shard's results while its batches run: every crop's prediction columns, whether its logits were finite,
    and the aggregation sums, all on the device and filled without waiting for it; crop ``p`` is view
    ``p % n_views`` of image ``p // n_views``."""

    def __init__(self, classifier: Classifier, n_images: int, grid: ZoomGrid) -> None:
        members = _members(grid, classifier.device)
        self.classifier, self.n_crops = classifier, n_images * len(members)
        self.columns: dict[str, torch.Tensor] = {}
        self.finite = torch.empty(self.n_crops, dtype=torch.bool, device=classifier.device)
        self.means = MeanSoftmax(n_images, members, len(classifier.subset))

    def add(self, start: int, logits: torch.Tensor) -> None:
        """The results of crops ``start``, ``start + 1``, ... (a batch's ``logits``)."""
        probs = self.classifier.probabilities(logits)
        stop = start + len(logits)
        for name, values in self.classifier.device_columns(logits, probs).items():
            if name not in self.columns:
                self.columns[name] = values.new_empty((self.n_crops, *values.shape[1:]))
            self.columns[name][start:stop] = values
        self.finite[start:stop] = self.classifier.finite(logits)
        self.means.add(start, probs)

    def to_host(self) -> HostCopy:
        """Start the one copy of the shard's results to the host."""
        mean_pred, mean_conf = self.means.predictions(self.classifier.subset)
        return HostCopy({**self.columns, "finite": self.finite, "mean_pred": mean_pred, "mean_conf": mean_conf})


class HostCopy:
    """Tensors being copied to the host: into pinned memory and asynchronously from a GPU, so that the device goes
    on with the next shard; :meth:`wait` waits for the copy only."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        cuda = any(t.is_cuda for t in tensors.values())
        self.host = {k: torch.empty(t.shape, dtype=t.dtype, pin_memory=cuda) for k, t in tensors.items()}
        for name, t in tensors.items():
            self.host[name].copy_(t, non_blocking=cuda)
        self.done = torch.cuda.Event() if cuda else None
        if self.done is not None:
            self.done.record()

    def wait(self) -> dict[str, np.ndarray]:
        if self.done is not None:
            self.done.synchronize()
        return {name: t.numpy() for name, t in self.host.items()}


def infer_shard(
    classifier: Classifier,
    images: Iterable[tuple[int, torch.Tensor]],
    records: Sequence[Record],
    grid: ZoomGrid,
    progress: ProgressLog | None = None,
) -> HostCopy:
    """Run the model over one shard: ``images`` yields ``(index in records, crops)`` in order (``progress`` logs
    the crops done). Nothing waits for the device until the shard's results are copied back, at the end."""
    results = ShardResults(classifier, len(records), grid)
    n_views, start = results.n_crops // len(records), 0
    with torch.inference_mode():
        for images_of, views, batch in batches(images, classifier.settings.batch_size):
            if images_of[0] * n_views + views[0] != start:  # the results' layout depends on it
                raise RuntimeError(f"crops came out of order: image {images_of[0]} view {views[0]} at crop {start}")
            results.add(start, classifier.logits(batch))
            start += len(views)
            if progress is not None:
                progress.advance(len(views))
        if start != results.n_crops:
            raise RuntimeError(f"the shard's images gave {start} crops, expected {results.n_crops}")
        return results.to_host()


def shard_tables(
    classifier: Classifier, records: Sequence[Record], grid: ZoomGrid, copy: HostCopy
) -> tuple[pa.Table, pa.Table]:
    """The predictions and aggregates tables of a shard from its results (:func:`infer_shard`) once on the host;
    non-finite logits are refused here, naming the first image and view affected."""
    methods, members = grid.membership
    values, n_views = copy.wait(), len(members)

    def where(crop: int) -> str:
        record = records[crop // n_views]
        return f"image {record.image_id} ({record.path}) under {_view_name(grid, crop % n_views)}"

    classifier.check_finite(values.pop("finite"), where)
    mean_pred, mean_conf = values.pop("mean_pred"), values.pop("mean_conf")
    columns = {name: v.reshape(len(records), n_views, *v.shape[1:]) for name, v in values.items()}
    ids = [r.image_id for r in records]
    aggregates = aggregate(ids, methods, members, columns["pred"], columns["conf"], mean_pred, mean_conf)
    predictions = prediction_table(records, grid, {name: v[:, : grid.n_transforms] for name, v in columns.items()})
    return predictions, aggregates


def _view_name(grid: ZoomGrid, view: int) -> str:
    if view < grid.n_transforms:
        return f"transform {grid.transforms[view].name}"
    return f"extra view {view - grid.n_transforms} of the 5-/10-crop methods"


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
    return {
        **asdict(spec),
        **classifier.normalisation,
        "weights_sha256": classifier.weights_sha256,
        "param_count": sum(p.numel() for p in classifier.model.parameters()),
        **classifier.provenance,
    }


def prediction_metadata(
    classifier: Classifier,
    spec: ModelSpec,
    grid: ZoomGrid,
    settings: InferenceSettings,
    class_indices: Sequence[int] | None,
    **job: Any,
) -> dict[str, Any]:
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
        "scales": list(grid.scales),
        "crop_size": spec.input_size,
        "resize_backend": resolve_backend(settings.resize_backend, classifier.device),
        "precision": settings.precision,
        "compile": classifier.settings.compile,  # as it ran (off on a CPU)
        "channels_last": settings.channels_last,
        "class_set": "full" if class_indices is None else "subset",
        "class_indices": None if class_indices is None else list(class_indices),
        "n_images": job["n_images"],
    }


def _aggregates_metadata(metadata: dict[str, Any], grid: ZoomGrid) -> dict[str, Any]:
    methods, members = grid.membership
    views = {m: int(n) for m, n in zip(methods, members.sum(axis=0), strict=True)}
    return {**metadata, "kind": "aggregates", "schema_version": AGGREGATES_SCHEMA_VERSION, "views": views}


def predict_to_file(
    path: str | os.PathLike[str],
    aggregates_path: str | os.PathLike[str],
    records: Sequence[Record],
    spec: ModelSpec,
    grid: ZoomGrid,
    settings: InferenceSettings,
    dataset: str,
    variant: str = "original",
    masks: dict[str, bytes] | None = None,
    class_indices: Sequence[int] | None = None,
    max_pixels: int = MAX_RESIZED_PIXELS,
    weights: Path | None = None,
    head: Path | None = None,
    part: tuple[int, int] | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Predict every (image, transform) of ``records`` into the Parquet file ``path`` and the aggregation
    methods' predictions into ``aggregates_path``; returns the predictions' metadata.

    ``class_indices`` is the dataset's class set for ``pred`` (``None``: all 1000 classes); ``max_pixels`` the
    pixel budget of one resized image (``max_resized_pixels``); ``weights`` the folder of the fetched weights;
    ``head`` the zero-shot head of an open_clip model; ``part`` (index, count): only that part's run of shards of
    ``records`` (the whole manifest's, :func:`~zoomeval.inference.parts.part_range`; empty files where it has none),
    recorded in the metadata; ``inputs`` what it records of its inputs (``dataset_adapter``: the manifest's adapter,
    for published results; ``dataset_revisions``: the manifest's hub commits, where there are any; ``masks_sha256``:
    a masked variant's mask file, by which an audit finds it)."""
    check_sizes(records, dataset, max(grid.scales), max_pixels)
    if part is not None and not (records := _part_of(records, settings.shard_images, part)):
        return _empty_part(path, aggregates_path, settings.store_top5, part)
    store = ShardStore(Path(path), Path(aggregates_path))
    with store.locked():
        use_threads(settings.threads)
        classifier = Classifier(spec, settings, class_indices, weights, head=head)
        metadata = prediction_metadata(
            classifier, spec, grid, settings, class_indices, dataset=dataset, variant=variant, n_images=len(records)
        )
        metadata |= (inputs or {}) | ({"part": list(part)} if part is not None else {})
        masks_digest = hashlib.sha256(b"".join(masks[r.image_id] for r in records)).hexdigest() if masks else None
        pending = list(store.pending(records, settings.shard_images, metadata, masks_digest))
        computed = sum(len(chunk) for _, chunk, _ in pending)
        seconds = run_shards(classifier, store, pending, grid, variant, masks, spec.input_size) if pending else 0.0
        metadata |= {  # after the shards' identity: a rerun at another commit reuses them
            **source(),
            "device": classifier.device.type,
            "seconds": round(seconds, 3),
            "crops_per_second": round(computed * grid.n_views() / seconds, 2) if seconds else None,
        }
        store.finish(-(-len(records) // settings.shard_images), metadata, _aggregates_metadata(metadata, grid))
        return metadata


def run_shards(
    classifier: Classifier,
    store: ShardStore,
    pending: Sequence[tuple[int, Sequence[Record], str]],
    grid: ZoomGrid,
    variant: str,
    masks: dict[str, bytes] | None,
    crop_size: int,
) -> float:
    """Compute and write the ``pending`` shards (:meth:`ShardStore.pending`) from one DataLoader; returns the
    seconds it took."""
    start = time.perf_counter()
    progress = ProgressLog(sum(len(chunk) for _, chunk, _ in pending), grid.n_views(), log)  # read by `zoomeval run`
    progress.line()  # the total, at once
    images = crop_stream(classifier, [r for _, chunk, _ in pending for r in chunk], grid, variant, masks, crop_size)
    # Each shard's results are copied back, made into tables and written in the background while the device goes
    # on with the next shard; one shard at a time, so that an error (non-finite logits) stops the job.
    with ThreadPoolExecutor(max_workers=1) as writer:
        written: Future[None] | None = None
        offset = 0
        for index, chunk, identity in pending:
            own = ((i - offset, crops) for i, crops in itertools.islice(images, len(chunk)))
            copy = infer_shard(classifier, own, chunk, grid, progress)
            progress.line(f"shard {index} computed")
            if written is not None:
                written.result()
            written = writer.submit(_write_shard, store, index, identity, classifier, chunk, grid, copy)
            offset += len(chunk)
        if written is not None:
            written.result()
    return time.perf_counter() - start


def _write_shard(
    store: ShardStore,
    index: int,
    identity: str,
    classifier: Classifier,
    records: Sequence[Record],
    grid: ZoomGrid,
    copy: HostCopy,
) -> None:
    store.write(index, identity, *shard_tables(classifier, records, grid, copy))


def _part_of(records: Sequence[Record], shard_images: int, part: tuple[int, int]) -> Sequence[Record]:
    """Part ``part`` (index, count) of the whole manifest's ``records``: its run of shards, empty where it has none."""
    span = part_range(len(records), shard_images, *part)
    if not span:
        log.info("part %d of %d has no images: %d images make fewer shards than parts", *part, len(records))
    return records[span.start : span.stop]


def _empty_part(
    path: str | os.PathLike[str], aggregates_path: str | os.PathLike[str], store_top5: bool, part: tuple[int, int]
) -> dict[str, Any]:
    metadata = {"kind": "predictions", "part": list(part), "n_images": 0}
    write_table(aggregates_path, pa.schema(AGGREGATES_FIELDS).empty_table(), {**metadata, "kind": "aggregates"})
    write_table(path, prediction_schema(store_top5).empty_table(), metadata)
    return metadata
