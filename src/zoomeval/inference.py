"""Run one model over every zoom transform of every image of one dataset variant.

Each image is decoded once in a DataLoader worker, resized once per scale and cut nine times
(:func:`zoomeval.zoom.all_crops`); the main process batches crops across images, normalises them on the
device and keeps the argmax, the argmax over the dataset's class set and its softmax probability.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from zoomeval import __version__
from zoomeval.io import write_parquet
from zoomeval.manifest import Record
from zoomeval.masks import apply_variant, decode_mask
from zoomeval.models import ModelSpec, load_model
from zoomeval.zoom import all_crops, transforms

log = logging.getLogger(__name__)

#: Version of the prediction Parquet layout (columns below and the ``zoomeval`` metadata keys).
SCHEMA_VERSION = 1

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


@dataclass(frozen=True)
class Settings:
    """The ``inference`` config section."""

    batch_size: int = 64
    device: str = "auto"
    num_workers: int = 1
    threads: int = 0
    precision: str = "fp32"
    store_top5: bool = False

    def resolve_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


class ZoomCrops(Dataset[tuple[int, torch.Tensor]]):
    """Image ``i`` of a manifest as all its crops, ``(n_transforms, size, size, 3)`` uint8."""

    def __init__(
        self,
        records: Sequence[Record],
        scales: list[int],
        variant: str = "original",
        masks: dict[str, bytes] | None = None,
        size: int = 224,
    ) -> None:
        self.records, self.scales, self.variant, self.masks, self.size = records, scales, variant, masks, size

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        record = self.records[i]
        with Image.open(record.path) as raw:
            image = raw.convert("RGB")
        if (image.width, image.height) != (record.width, record.height):
            raise ValueError(f"{record.path}: size {image.size} differs from the manifest's")
        mask = decode_mask(self.masks[record.image_id]) if self.variant != "original" and self.masks else None
        image = apply_variant(image, mask, self.variant)
        return i, torch.from_numpy(all_crops(image, self.scales, self.size))


def _batches(
    loader: Iterator[tuple[int, torch.Tensor]], batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, torch.Tensor]]:
    """Regroup per-image crop stacks into batches of ``batch_size`` crops across image boundaries.

    Yields ``(image_index, transform_index, crops)`` per batch.
    """
    pending: list[tuple[int, int, torch.Tensor]] = []  # (image, first transform, crops)
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


def predict(
    records: Sequence[Record],
    spec: ModelSpec,
    scales: list[int],
    settings: Settings,
    dataset: str,
    variant: str = "original",
    masks: dict[str, bytes] | None = None,
    class_indices: Sequence[int] | None = None,
) -> tuple[pa.Table, dict[str, Any]]:
    """Predictions for every (image, transform), in image order then :func:`transforms` order.

    ``class_indices`` is the dataset's class set for ``pred`` (``None``: all 1000 classes). Returns the
    table and the metadata that describes how it was made.
    """
    device = settings.resolve_device()
    threads = settings.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    loaded = load_model(spec)
    model = loaded.module.to(device).to(memory_format=torch.channels_last)
    mean = torch.tensor(spec.mean, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(spec.std, device=device).view(1, 3, 1, 1) * 255
    subset = torch.tensor(class_indices if class_indices is not None else range(1000), device=device)
    autocast = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[settings.precision]

    order = transforms(scales)
    n_t, n_i = len(order), len(records)
    pred = np.empty((n_i, n_t), np.int16)
    pred_full = np.empty((n_i, n_t), np.int16)
    conf = np.empty((n_i, n_t), np.float32)
    top5 = np.empty((n_i, n_t, 5), np.int16) if settings.store_top5 else None
    top5_logit = np.empty((n_i, n_t, 5), np.float32) if settings.store_top5 else None

    crops = ZoomCrops(records, scales, variant, masks, spec.input_size)
    loader = DataLoader(
        crops,
        batch_size=None,
        num_workers=settings.num_workers,
        pin_memory=device.type == "cuda",
        prefetch_factor=2 if settings.num_workers else None,
        persistent_workers=False,
    )
    start, done_crops = time.perf_counter(), 0
    with torch.inference_mode():
        for images, tids, batch in _batches(iter(loader), settings.batch_size):
            x = batch.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
            x = ((x - mean) / std).contiguous(memory_format=torch.channels_last)
            with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                logits = model(x)
            logits = logits.float()
            sub = logits[:, subset]
            prob, arg = sub.softmax(dim=1).max(dim=1)
            pred[images, tids] = subset[arg].cpu().numpy()
            pred_full[images, tids] = logits.argmax(dim=1).cpu().numpy()
            conf[images, tids] = prob.cpu().numpy()
            if top5 is not None and top5_logit is not None:
                values, indices = logits.topk(5, dim=1)
                top5[images, tids] = indices.cpu().numpy()
                top5_logit[images, tids] = values.cpu().numpy()
            done_crops += len(tids)
            elapsed = time.perf_counter() - start
            log.info(
                "%d/%d crops, %.1f crops/s, %.2f images/s",
                done_crops, n_t * n_i, done_crops / elapsed, done_crops / n_t / elapsed,
            )  # fmt: skip
    elapsed = time.perf_counter() - start

    columns: dict[str, Any] = {
        "image_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(n_i, dtype=np.int32), n_t)), pa.array([r.image_id for r in records])
        ),
        "scale": np.tile(np.array([t.scale for t in order], np.int16), n_i),
        "row": np.tile(np.array([t.row for t in order], np.int8), n_i),
        "col": np.tile(np.array([t.col for t in order], np.int8), n_i),
        "pred": pred.ravel(),
        "pred_full": pred_full.ravel(),
        "conf": conf.ravel(),
    }
    fields = list(BASE_FIELDS)
    if top5 is not None and top5_logit is not None:
        columns["top5"] = pa.FixedSizeListArray.from_arrays(pa.array(top5.ravel()), 5)
        columns["top5_logit"] = pa.FixedSizeListArray.from_arrays(pa.array(top5_logit.ravel()), 5)
        fields += TOP5_FIELDS
    table = pa.table(columns, schema=pa.schema(fields))
    metadata = {
        "kind": "predictions",
        "schema_version": SCHEMA_VERSION,
        "zoomeval": __version__,
        "torch": torch.__version__,
        "model": {**asdict(spec), "weights_sha256": loaded.weights_sha256},
        "dataset": dataset,
        "variant": variant,
        "scales": scales,
        "crop_size": spec.input_size,
        "resize_backend": "pil",
        "precision": settings.precision,
        "device": device.type,
        "class_set": "full" if class_indices is None else "subset",
        "class_indices": None if class_indices is None else list(class_indices),
        "n_images": n_i,
        "seconds": round(elapsed, 3),
        "crops_per_second": round(n_t * n_i / elapsed, 2) if elapsed else None,
    }
    return table, metadata


def write_predictions(path: str | os.PathLike[str], table: pa.Table, metadata: dict[str, Any]) -> None:
    write_parquet(path, table, metadata)
