"""The ``tta`` stage: one model on one dataset with one test-time method, one prediction per image.

Methods (:data:`zoomeval.core.config.TTA_METHODS`): ``none`` is the model's standard evaluation (the standard
view, eval-mode BatchNorm: MEMO's baseline, ``test_initial.py``); ``memo_augmix`` and ``memo_rrc`` run MEMO
(:mod:`zoomeval.inference.memo`) with AugMix or RandomResizedCrop views before predicting on the standard view.

Images are processed one at a time in the main process, as the authors' code does, and ``seconds`` is each
image's wall time from decoding to prediction, so the methods' costs compare like for like (on a GPU the K views
go through the model as one batch). On a CPU, a rerun gives bit-identical predictions; on a GPU cuDNN is kept to
deterministic kernels, but a few backward kernels (atomic adds) can still differ in the last bits.

The job writes its results in shards (:class:`~zoomeval.inference.shards.ShardStore`), so a killed job resumes at
its last finished shard: every image's views come from its own seeded generator and MEMO restores the weights
before every image, so the resumed file has the same predictions as an uninterrupted run.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from zoomeval import __version__
from zoomeval.core.config import MemoSettings, ModelSpec
from zoomeval.core.devices import resolve_device, use_threads
from zoomeval.core.images import load_rgb
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record
from zoomeval.inference.classifier import check_normalisation
from zoomeval.inference.memo import Memo, batch_norm_layers
from zoomeval.inference.models import load_model
from zoomeval.inference.shards import ShardStore
from zoomeval.inference.tta_views import METHODS, describe, make_views, standard_view, view_seed

log = logging.getLogger(__name__)

#: Version of the tta Parquet layout (the columns below and the ``zoomeval`` metadata keys).
SCHEMA_VERSION = 1
#: The columns; the final file stores ``image_id`` dictionary-encoded, as the prediction files do.
SCHEMA = pa.schema(
    [
        pa.field("image_id", pa.string()),
        pa.field("pred", pa.int16()),
        pa.field("pred_full", pa.int16()),
        pa.field("conf", pa.float32()),
        pa.field("seconds", pa.float32()),
    ]
)
declare("tta", SCHEMA, SCHEMA_VERSION)
#: K in the authors' code (``--batch_size`` of ``test_adapt.py``, never overridden); the paper says K = 16.
AUTHORS_CODE_VIEWS = 64


@dataclass
class Adapter:
    """One model on its device with one test-time method: :meth:`predict` gives an image's prediction."""

    model: torch.nn.Module
    method: str
    settings: MemoSettings
    seed: int
    subset: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    size: int
    memo: Memo | None

    def normalised(self, x: torch.Tensor) -> torch.Tensor:
        return ((x.to(self.subset.device) - self.mean) / self.std).contiguous(memory_format=torch.channels_last)

    def predict(self, record: Record) -> tuple[int, int, float]:
        """``(pred, pred_full, conf)`` of one image: over the class subset, over all classes, the subset softmax."""
        image = load_rgb(record)
        x = self.normalised(standard_view(image, self.size).unsqueeze(0))
        if self.memo is None:
            with torch.no_grad():
                logits = self.model(x).float()
        else:
            self.memo.reset()  # episodic: every image starts from the original weights and buffers
            s = self.settings
            views = make_views(image, self.method, s.views * s.steps, self.size, view_seed(self.seed, record.image_id))
            losses = self.memo.adapt(self.normalised(views).split(s.views), self.subset)
            if not all(map(math.isfinite, losses)):
                _non_finite(record, f"a non-finite MEMO loss ({losses})")
            logits = self.memo.logits(x)
        if not torch.isfinite(logits).all():
            _non_finite(record, "non-finite logits (NaN or inf)")
        conf, arg = logits[:, self.subset].softmax(dim=1).max(dim=1)
        return int(self.subset[arg]), int(logits.argmax(dim=1)), float(conf)


def _non_finite(record: Record, what: str) -> None:
    raise FloatingPointError(
        f"the model gave {what} on image {record.image_id} ({record.path}); check the model's weights and mean/std, "
        "and lower tta.lr"
    )


def _shard(adapter: Adapter, records: Sequence[Record]) -> tuple[pa.Table, float]:
    """The predictions of ``records`` as a table, and the CPU seconds they took."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    cpu = time.process_time()
    for record in records:
        began = time.perf_counter()
        for name, value in zip(SCHEMA.names, (record.image_id, *adapter.predict(record)), strict=False):
            columns[name].append(value)
        columns["seconds"].append(time.perf_counter() - began)
    return pa.table(columns, schema=SCHEMA), time.process_time() - cpu


def tta_metadata(
    adapter: Adapter, spec: ModelSpec, loaded: Any, dataset: str, class_indices: Sequence[int] | None, n_images: int
) -> dict[str, Any]:
    """What the job's numbers depend on (also the shards' identity), timings aside."""
    memo = (
        {}
        if adapter.memo is None
        else {
            **asdict(adapter.settings),
            "seed": adapter.seed,
            "bn_layers": len(batch_norm_layers(adapter.model)),
            "authors_code_views": AUTHORS_CODE_VIEWS,
        }
    )
    return {
        "kind": "tta",
        "schema_version": SCHEMA_VERSION,
        "zoomeval": __version__,
        "torch": torch.__version__,
        "model": {
            **spec.entry(),
            "name": spec.name,
            "mean": list(loaded.mean),
            "std": list(loaded.std),
            "weights_sha256": loaded.weights_sha256,
            **loaded.provenance,
        },
        "dataset": dataset,
        "method": adapter.method,
        "class_set": "full" if class_indices is None else "subset",
        "class_indices": None if class_indices is None else list(class_indices),
        "n_images": n_images,
        "device": adapter.subset.device.type,
        "settings": describe(adapter.method, adapter.size) | memo,
    }


def make_adapter(
    spec: ModelSpec,
    method: str,
    settings: MemoSettings,
    seed: int,
    class_indices: Sequence[int] | None,
    device: str,
    weights: Path | None,
    head: Path | None = None,
) -> tuple[Adapter, Any]:
    """The model of ``spec`` (weights fetched into ``weights``; ``head``: an open_clip model's zero-shot head) on
    ``device``, set up for ``method``; and the :class:`~zoomeval.inference.models.LoadedModel` it came from."""
    if method not in METHODS:
        raise ValueError(f"unknown test-time method {method!r}; use one of {list(METHODS)}")
    target = resolve_device(device, "inference.device")
    if target.type == "cuda":
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    check_normalisation(spec)
    loaded = load_model(spec, weights, head)
    model = loaded.module.to(target).to(memory_format=torch.channels_last).eval()  # faster, as in predict
    subset = torch.tensor(list(class_indices) if class_indices is not None else range(1000), device=target)
    mean, std = (torch.tensor(v, device=target).view(1, 3, 1, 1) for v in (loaded.mean, loaded.std))
    memo = Memo(model, settings) if method != "none" else None
    return Adapter(model, method, settings, seed, subset, mean, std, spec.input_size, memo), loaded


def run_tta_to_file(
    path: str | os.PathLike[str],
    records: Sequence[Record],
    spec: ModelSpec,
    method: str,
    dataset: str,
    settings: MemoSettings | None = None,
    seed: int = 0,
    class_indices: Sequence[int] | None = None,
    device: str = "auto",
    threads: int = 0,
    weights: Path | None = None,
    shard_images: int = 500,
    head: Path | None = None,
) -> dict[str, Any]:
    """Predict every image of ``records`` with ``method`` into the Parquet file ``path``; returns its metadata.

    ``class_indices`` is the dataset's class set (``None``: all 1000 classes): MEMO's loss and the prediction use
    only those logits, as the authors' code cuts the logits before the loss. ``seed`` seeds each image's views
    together with its id; ``weights`` is the folder of the fetched weights, ``head`` an open_clip model's zero-shot
    head. Results are kept in shards of ``shard_images`` images, which a rerun after a kill reuses."""
    if not records:
        raise ValueError(f"dataset {dataset!r}: the manifest lists no images, so there is nothing to predict")
    store = ShardStore(Path(path))
    with store.locked():
        use_threads(threads)
        adapter, loaded = make_adapter(
            spec, method, settings or MemoSettings(), seed, class_indices, device, weights, head
        )
        metadata = tta_metadata(adapter, spec, loaded, dataset, class_indices, len(records))
        seconds, cpu, computed = 0.0, 0.0, 0
        for index, chunk, identity in store.pending(records, shard_images, metadata):
            table, took = _shard(adapter, chunk)
            store.write(index, identity, table)
            seconds, cpu, computed = seconds + sum(table["seconds"].to_pylist()), cpu + took, computed + len(chunk)
            log.info("shard %d: %d images, %.3f s/image", index, len(chunk), seconds / computed)
        metadata |= {
            "threads": torch.get_num_threads(),
            # of the images this run computed (a resumed run reuses the others' seconds column)
            "seconds_per_image": round(seconds / computed, 4) if computed else None,
            # CPU time of all threads per image: on a shared machine a steadier measure of cost than wall time
            "cpu_seconds_per_image": round(cpu / computed, 4) if computed else None,
        }
        store.finish(-(-len(records) // shard_images), metadata)
        return metadata
