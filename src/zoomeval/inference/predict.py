"""Run one model over every zoom transform of every image of one dataset variant.

Each image is decoded once in a DataLoader worker, resized once per scale and cut nine times
(:func:`zoomeval.core.zoom.all_crops`); the main process batches uint8 crops across images, moves them to the
device (pinned memory on CUDA), normalises them there and keeps the argmax, the argmax over the
dataset's class set and its softmax probability, and sums the softmax vectors for the aggregation methods
(:mod:`zoomeval.inference.aggregation`).

Results are written in shards of ``shard_images`` images (each shard atomically), so a killed job loses
at most the shard it was working on; a rerun reuses every shard whose identity (model, weights hash,
scales, variant, class set, precision, resize backend, image ids, masks) matches, then merges them. A job
holds a lock on its shard folder, so a second job for the same output (a rerun racing one that was left
running when Snakemake was killed) refuses to start.

Before any work the job refuses images that would exceed the pixel budget at the largest scale (the
manifest step leaves them out, :mod:`zoomeval.core.images`); during it, non-finite logits (fp16 overflow, a
normalisation that overflows) stop the job naming the model, the precision and the first image affected.
Each job writes two files: the predictions (a row per image and transform) and the aggregates (a row per
image and aggregation method).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, Dataset

from zoomeval import __version__
from zoomeval.core.devices import resolve_device
from zoomeval.core.images import MAX_RESIZED_PIXELS, load_rgb, too_large
from zoomeval.core.io import read_metadata, write_parquet
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import Transform, all_crops, transforms
from zoomeval.inference.aggregation import SCHEMA_VERSION as AGGREGATES_SCHEMA_VERSION
from zoomeval.inference.aggregation import MeanSoftmax, aggregate, membership
from zoomeval.inference.models import ModelSpec, load_model
from zoomeval.masks.boxes import apply_variant, decode_mask

log = logging.getLogger(__name__)

#: Version of the prediction Parquet layout (columns below and the ``zoomeval`` metadata keys).
#: 2: the job also writes the aggregates file.
SCHEMA_VERSION = 2

BASE_FIELDS = [
    pa.field("image_id", pa.dictionary(pa.int32(), pa.string())),
    pa.field("scale", pa.int16()),
    pa.field("row", pa.int8()),
    pa.field("col", pa.int8()),
    pa.field("pred", pa.int16()),
    pa.field("pred_full", pa.int16()),
    pa.field("conf", pa.float32()),
]
TOP5_FIELDS = [pa.field("top5", pa.list_(pa.int16(), 5)), pa.field("top5_logit", pa.list_(pa.float32(), 5))]
#: Seconds between progress lines in the job's log.
PROGRESS_SECONDS = 10.0
#: Float columns compress far better split into byte streams than dictionary-encoded.
FLOAT_COLUMNS = ["conf", "top5_logit", "conf_max", "conf_mean"]


@dataclass(frozen=True)
class Settings:
    """The ``inference`` config section."""

    batch_size: int = 64
    device: str = "auto"
    num_workers: int = 1
    threads: int = 0
    precision: str = "fp32"
    resize_backend: str = "pil"
    compile: bool = False
    store_top5: bool = False
    shard_images: int = 500

    def resolve_device(self) -> torch.device:
        return resolve_device(self.device, "inference.device")


class ZoomCrops(Dataset[tuple[int, torch.Tensor]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8, followed by the
    aggregation methods' extra views with ``extra_views``."""

    def __init__(
        self,
        records: Sequence[Record],
        scales: list[int],
        variant: str = "original",
        masks: dict[str, bytes] | None = None,
        size: int = 224,
        backend: str = "pil",
        extra_views: bool = False,
    ) -> None:
        self.records, self.scales, self.variant, self.masks = records, scales, variant, masks
        self.size, self.backend, self.extra_views = size, backend, extra_views

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        record = self.records[i]
        image = load_rgb(record)
        mask = decode_mask(self.masks[record.image_id]) if self.variant != "original" and self.masks else None
        image = apply_variant(image, mask, self.variant)
        return i, torch.from_numpy(all_crops(image, self.scales, self.size, self.backend, self.extra_views))


def batches(
    loader: Iterator[tuple[int, torch.Tensor]], batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, torch.Tensor]]:
    """Regroup per-image crop stacks into batches of ``batch_size`` crops across image boundaries.

    Yields ``(image_index, transform_index, crops)`` per batch.
    """
    pending: list[tuple[int, int, torch.Tensor]] = []  # (image, first transform not yet yielded, crops)
    held = 0
    for i, crops in loader:
        pending.append((i, 0, crops))
        held += len(crops)
        while held >= batch_size:
            yield _take(pending, batch_size)
            held -= batch_size
    if held:
        yield _take(pending, held)


def _take(pending: list[tuple[int, int, torch.Tensor]], n: int) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    images, tids, parts = [], [], []
    while n:
        i, start, crops = pending[0]
        k = min(n, len(crops) - start)
        images.append(np.full(k, i, dtype=np.int64))
        tids.append(np.arange(start, start + k))
        parts.append(crops[start : start + k])
        n -= k
        if start + k == len(crops):
            pending.pop(0)
        else:
            pending[0] = (i, start + k, crops)
    return np.concatenate(images), np.concatenate(tids), torch.cat(parts) if len(parts) > 1 else parts[0]


def check_normalisation(spec: ModelSpec) -> None:
    """Refuse a configured ``mean``/``std`` that would make every input NaN or infinite."""
    for key, values in (("mean", spec.mean), ("std", spec.std)):
        if values is None:
            continue
        if len(values) != 3 or not all(math.isfinite(v) for v in values) or (key == "std" and min(values) <= 0):
            need = "three finite numbers" + (" > 0" if key == "std" else "")
            raise ValueError(f"models.{spec.name}.{key} is {list(values)}; it must be {need}: fix it in the config")


class Classifier:
    """A loaded model on its device that turns uint8 NHWC crop batches into prediction columns."""

    def __init__(self, spec: ModelSpec, settings: Settings, class_indices: Sequence[int] | None) -> None:
        self.device = settings.resolve_device()
        self.settings = settings
        self.name = spec.name
        check_normalisation(spec)
        loaded = load_model(spec)
        self.weights_sha256 = loaded.weights_sha256
        self.normalisation = {"mean": list(loaded.mean), "std": list(loaded.std)}
        model = loaded.module.to(self.device).to(memory_format=torch.channels_last)
        self.model = torch.compile(model) if settings.compile else model
        self.mean = torch.tensor(loaded.mean, device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(loaded.std, device=self.device).view(1, 3, 1, 1) * 255
        indices = class_indices if class_indices is not None else range(1000)
        self.subset = torch.tensor(list(indices), device=self.device)
        self.autocast = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[settings.precision]

    def logits(self, crops: torch.Tensor) -> torch.Tensor:
        x = crops.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = ((x - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            return self.model(x).float()

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax over the dataset's class set."""
        return logits[:, self.subset].softmax(dim=1)

    def columns(self, logits: torch.Tensor, probs: torch.Tensor | None = None) -> dict[str, np.ndarray]:
        """The prediction columns of a batch; ``probs`` is :meth:`probabilities` if already computed."""
        prob, arg = (self.probabilities(logits) if probs is None else probs).max(dim=1)
        out = {
            "pred": self.subset[arg].cpu().numpy().astype(np.int16),
            "pred_full": logits.argmax(dim=1).cpu().numpy().astype(np.int16),
            "conf": prob.cpu().numpy().astype(np.float32),
        }
        if self.settings.store_top5:
            values, indices = logits.topk(5, dim=1)
            out["top5"] = indices.cpu().numpy().astype(np.int16)
            out["top5_logit"] = values.cpu().numpy().astype(np.float32)
        return out


def _shard_table(records: Sequence[Record], scales: list[int], columns: dict[str, np.ndarray]) -> pa.Table:
    order = transforms(scales)
    n_t, n_i = len(order), len(records)
    data: dict[str, Any] = {
        "image_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(n_i, dtype=np.int32), n_t)), pa.array([r.image_id for r in records])
        ),
        "scale": np.tile(np.array([t.scale for t in order], np.int16), n_i),
        "row": np.tile(np.array([t.row for t in order], np.int8), n_i),
        "col": np.tile(np.array([t.col for t in order], np.int8), n_i),
        "pred": columns["pred"].ravel(),
        "pred_full": columns["pred_full"].ravel(),
        "conf": columns["conf"].ravel(),
    }
    fields = list(BASE_FIELDS)
    if "top5" in columns:
        data["top5"] = pa.FixedSizeListArray.from_arrays(pa.array(columns["top5"].ravel()), 5)
        data["top5_logit"] = pa.FixedSizeListArray.from_arrays(pa.array(columns["top5_logit"].ravel()), 5)
        fields += TOP5_FIELDS
    return pa.table(data, schema=pa.schema(fields))


def _write_table(path: str | os.PathLike[str], table: pa.Table, metadata: dict[str, Any]) -> None:
    floats = [c for c in FLOAT_COLUMNS if c in table.column_names]
    write_parquet(
        path,
        table,
        metadata,
        use_dictionary=[c for c in table.column_names if c not in floats],
        use_byte_stream_split=floats,
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
    settings = classifier.settings
    methods, members = membership(transforms(scales))
    n_t, n_v, n_i = 9 * len(scales), len(members), len(records)
    shapes = {"pred": (), "pred_full": (), "conf": ()}
    if settings.store_top5:
        shapes |= {"top5": (5,), "top5_logit": (5,)}
    columns: dict[str, np.ndarray] = {}
    means = MeanSoftmax(n_i, members, len(classifier.subset), classifier.device)
    loader = DataLoader(
        ZoomCrops(records, scales, variant, masks, crop_size, settings.resize_backend, extra_views=True),
        batch_size=None,
        num_workers=settings.num_workers,
        pin_memory=classifier.device.type == "cuda",
        prefetch_factor=2 if settings.num_workers else None,
    )
    start = last_report = time.perf_counter()
    done = 0
    with torch.inference_mode():
        for images, views, batch in batches(iter(loader), settings.batch_size):
            logits = classifier.logits(batch)
            if not (finite := torch.isfinite(logits).all(dim=1)).all():
                first = int((~finite).nonzero()[0])  # crops come in image order, then view order
                record = records[images[first]]
                raise FloatingPointError(
                    f"model {classifier.name!r} at precision {settings.precision} gave non-finite logits (NaN or "
                    f"inf) for image {record.image_id} ({record.path}) under {_view_name(scales, views[first])}; "
                    "with fp16 or bf16 use precision: fp32, else check the model's weights and its mean/std"
                )
            probs = classifier.probabilities(logits)
            means.add(images, views, probs)
            for name, values in classifier.columns(logits, probs).items():
                if name not in columns:
                    columns[name] = np.empty((n_i, n_v, *shapes[name]), values.dtype)
                columns[name][images, views] = values
            done += len(views)
            now = time.perf_counter()
            if now - last_report >= PROGRESS_SECONDS or done == n_v * n_i:
                rate = done / (now - start)
                log.info("%d/%d crops, %.1f crops/s, %.2f images/s", done, n_v * n_i, rate, rate / n_v)
                last_report = now
    ids = [r.image_id for r in records]
    aggregates = aggregate(ids, methods, members, columns["pred"], columns["conf"], means.sums, classifier.subset)
    predictions = _shard_table(records, scales, {name: values[:, :n_t] for name, values in columns.items()})
    return predictions, aggregates, time.perf_counter() - start


def _view_name(scales: list[int], view: int) -> str:
    order: list[Transform] = transforms(scales)
    if view < len(order):
        return f"transform {order[view].name}"
    return f"extra view {view - len(order)} of the 5-/10-crop methods"


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (created if needed); refuse if another process holds it. The lock
    goes away with the process that holds it, even on ``kill -9``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "a process"
            raise RuntimeError(
                f"{holder} is still writing {folder}: another predict job for the same output, probably left "
                "running when Snakemake was killed. Let it finish or end it (kill the pid; under SLURM, scancel its "
                "job), then run again"
            ) from None
        if not path.exists() or os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino:
            raise RuntimeError(f"another predict job finished writing {folder} meanwhile; run again")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}")
        fh.flush()
        yield


def predict_to_file(
    path: str | os.PathLike[str],
    aggregates_path: str | os.PathLike[str],
    records: Sequence[Record],
    spec: ModelSpec,
    scales: list[int],
    settings: Settings,
    dataset: str,
    variant: str = "original",
    masks: dict[str, bytes] | None = None,
    class_indices: Sequence[int] | None = None,
    max_pixels: int = MAX_RESIZED_PIXELS,
) -> dict[str, Any]:
    """Predict every (image, transform) of ``records`` into the Parquet file ``path`` and the aggregation
    methods' predictions into ``aggregates_path``; returns the predictions' metadata.

    ``class_indices`` is the dataset's class set for ``pred`` (``None``: all 1000 classes); ``max_pixels`` the
    pixel budget of one resized image (``max_resized_pixels``).
    """
    if not records:
        raise ValueError(f"dataset {dataset!r}: the manifest lists no images, so there is nothing to predict")
    for record in records:
        if why := too_large(record.width, record.height, max(scales), max_pixels):
            raise ValueError(
                f"dataset {dataset!r}: image {record.image_id} ({record.path}) is too large: {why}. Its manifest was "
                "built for smaller scales or a larger budget: rebuild it (--forcerun dataset_manifest)"
            )
    final = Path(path)
    shard_dir = final.with_name(f".{final.name}.shards")
    with _exclusive(shard_dir):
        torch.set_num_threads(settings.threads or os.cpu_count() or 1)
        classifier = Classifier(spec, settings, class_indices)
        metadata: dict[str, Any] = {
            "kind": "predictions",
            "schema_version": SCHEMA_VERSION,
            "zoomeval": __version__,
            "torch": torch.__version__,
            "model": {**asdict(spec), **classifier.normalisation, "weights_sha256": classifier.weights_sha256},
            "dataset": dataset,
            "variant": variant,
            "scales": scales,
            "crop_size": spec.input_size,
            "resize_backend": settings.resize_backend,
            "precision": settings.precision,
            "compile": settings.compile,
            "class_set": "full" if class_indices is None else "subset",
            "class_indices": None if class_indices is None else list(class_indices),
            "n_images": len(records),
        }
        masks_digest = hashlib.sha256(b"".join(masks[r.image_id] for r in records)).hexdigest() if masks else None
        shards: list[tuple[Path, Path]] = []
        seconds, computed = 0.0, 0
        for k in range(0, len(records), settings.shard_images):
            chunk = records[k : k + settings.shard_images]
            identity = hashlib.sha256(
                json.dumps([metadata, [r.image_id for r in chunk], masks_digest], sort_keys=True).encode()
            ).hexdigest()
            name = f"{k // settings.shard_images:05d}"
            pair = (shard_dir / f"{name}.parquet", shard_dir / f"{name}.aggregates.parquet")
            shards.append(pair)
            if all(p.exists() and read_metadata(p).get("identity") == identity for p in pair):
                log.info("reusing %s", pair[0])
                continue
            predictions, aggregates, took = run_shard(classifier, chunk, scales, variant, masks, spec.input_size)
            # The predictions shard last: once it is there, the pair is complete.
            _write_table(pair[1], aggregates, {"kind": "shard", "identity": identity})
            _write_table(pair[0], predictions, {"kind": "shard", "identity": identity})
            seconds += took
            computed += len(chunk)
        methods, members = membership(transforms(scales))
        metadata |= {
            "device": classifier.device.type,
            "seconds": round(seconds, 3),
            "crops_per_second": round(computed * len(members) / seconds, 2) if seconds else None,
        }
        views = {m: int(n) for m, n in zip(methods, members.sum(axis=0), strict=True)}
        _write_table(aggregates_path, _merge(p for _, p in shards), {
            **metadata, "kind": "aggregates", "schema_version": AGGREGATES_SCHEMA_VERSION, "views": views,
        })  # fmt: skip
        _write_table(final, _merge(p for p, _ in shards), metadata)
        shutil.rmtree(shard_dir)
        return metadata


def _merge(paths: Iterator[Path]) -> pa.Table:
    """Concatenate shards, with one dictionary for ``image_id``."""
    table = pa.concat_tables(pq.read_table(p) for p in paths)
    return table.set_column(0, "image_id", table["image_id"].cast(pa.string()).combine_chunks().dictionary_encode())
