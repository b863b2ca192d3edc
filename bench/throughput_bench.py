"""Throughput benchmark: the authors' per-transform data path against this project's, and the model limit.

Measured in one run, on the same images and model:

* ``naive_data``: the authors' way, one (image, transform) sample at a time: decode, torchvision
  ``Resize(S, BICUBIC)``, crop, ``ToTensor`` and ``Normalize`` in DataLoader workers, batched;
* ``data_<backend>``: this project's data path alone: decode once, resize once per scale, cut nine crops, batch
  uint8 crops across images (normalisation happens on the device, inside ``model``); ``data_device`` (the
  resize on the device) only on a GPU;
* ``model``: the model alone on ready uint8 batches (normalise + forward): the limit;
* ``naive``: the naive data path feeding the model;
* ``end_to_end``: this project's inference path (:func:`run_shard`), counting the
  aggregation methods' nine extra views per image as crops.

Each path also reports the user and system CPU seconds and minor page faults of the process and its workers.
The benchmark keeps freed memory as the model jobs do (:mod:`zoomeval.core.allocator`); ``--allocator default``
measures glibc's own behaviour, which maps and faults in the activation buffers again at every batch.

Usage: ``python bench/throughput_bench.py --manifest results/datasets/demo/manifest.parquet``
``--out results/bench/cpu.json``
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import platform
import resource
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import write_json
from zoomeval.core.manifest import Record, read_manifest
from zoomeval.core.progress import ProgressLog
from zoomeval.core.strict_yaml import load_yaml
from zoomeval.core.zoom import RESIZE_BACKENDS, ZoomGrid, all_crops, crop_box, paper_scales, transforms
from zoomeval.inference.batching import batches
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import AUTO_BACKEND, DEVICE_BACKEND, ZoomCrops
from zoomeval.inference.device_resize import device_crops, on_device
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel, fetched_weights
from zoomeval.inference.predict import crop_stream, infer_shard, shard_tables
from zoomeval.inference.tables import BASE_FIELDS

#: The measured resize backends: the workers' (``pil`` first, the reference), then the device's.
BACKENDS = (*RESIZE_BACKENDS, DEVICE_BACKEND)


class NaiveSamples(Dataset[torch.Tensor]):
    """One (image, transform) pair per sample, decoded and resized from scratch as the authors did."""

    def __init__(self, records: list[Record], scales: list[int], mean: list[float], std: list[float]) -> None:
        from torchvision import transforms as T

        self.pairs = [(r, t) for t in transforms(scales) for r in records]
        self.to_tensor = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
        self.resize = {s: T.Resize(s, interpolation=T.InterpolationMode.BICUBIC) for s in scales}

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> torch.Tensor:
        record, t = self.pairs[i]
        with Image.open(record.path) as raw:
            image = self.resize[t.scale](raw.convert("RGB"))
        return self.to_tensor(image.crop(crop_box(image.width, image.height, t.row, t.col)))


def run_shard(
    classifier: Classifier,
    records: Sequence[Record],
    grid: ZoomGrid,
    variant: str,
    masks: dict[str, bytes] | None,
    crop_size: int,
    images: Iterator[tuple[int, torch.Tensor]] | None = None,
) -> tuple[pa.Table, pa.Table, float]:
    """Predictions for ``records`` (image order, then :func:`transforms` order), their aggregates and the
    seconds it took, with a DataLoader of their own: the benchmarks' shard (this project's inference path, as
    :func:`zoomeval.inference.predict.run_shards` runs each shard). ``images``: their :func:`crop_stream`, if
    already started (see :func:`_paths`)."""
    progress = ProgressLog(len(records), grid.n_views(), logging.getLogger(__name__))
    if images is None:
        images = crop_stream(classifier, records, grid, variant, masks, crop_size)
    predictions, aggregates = shard_tables(
        classifier, records, grid, infer_shard(classifier, images, records, grid, progress)
    )
    progress.line()
    return predictions, aggregates, time.perf_counter() - progress.start


def _usage() -> tuple[float, float, int]:
    """User and system seconds and minor page faults of this process and its finished workers."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + workers.ru_utime, own.ru_stime + workers.ru_stime, own.ru_minflt + workers.ru_minflt)


def _measure(name: str, n_crops: int, work: Callable[[], Any]) -> dict[str, Any]:
    psutil.cpu_percent(percpu=False)  # resets the counter
    usage, start = _usage(), time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    user, system, faults = (after - before for after, before in zip(_usage(), usage, strict=True))
    result = {
        "crops": n_crops,
        "seconds": round(seconds, 3),
        "crops_per_second": round(n_crops / seconds, 2),
        "cpu_percent": psutil.cpu_percent(percpu=False),
        "user_seconds": round(user, 2),
        "system_seconds": round(system, 2),
        "minor_faults": faults,
    }
    if torch.cuda.is_available():
        try:
            result["gpu_percent"] = torch.cuda.utilization()
        except Exception:  # needs pynvml; utilisation is optional
            result["gpu_percent"] = None
    print(
        f"{name:>11}: {result['crops_per_second']:9.1f} crops/s  ({n_crops} crops, {seconds:.1f} s, "
        f"CPU {result['cpu_percent']:.0f}%, user {user:.1f} s, sys {system:.1f} s, {faults} minor faults)",
        flush=True,
    )
    return result


def _drain(iterable: Iterable[Any]) -> None:
    for _ in iterable:
        pass


def _loader_options(settings: InferenceSettings) -> dict[str, Any]:
    workers = settings.num_workers
    return {"num_workers": workers, "prefetch_factor": 2 if workers else None}


def _naive_loader(classifier: Classifier, records: list[Record], scales: list[int]) -> DataLoader[torch.Tensor]:
    samples = NaiveSamples(records, scales, **classifier.normalisation)
    return DataLoader(samples, batch_size=classifier.settings.batch_size, **_loader_options(classifier.settings))


def _data_batches(
    classifier: Classifier, records: list[Record], scales: list[int], size: int, backend: str
) -> Iterable[Any]:
    crops = ZoomCrops(records, scales, size=size, backend=backend)
    pin = classifier.device.type == "cuda"
    loader = iter(DataLoader(crops, batch_size=None, pin_memory=pin, **_loader_options(classifier.settings)))
    if backend == DEVICE_BACKEND:
        loader = on_device(loader, classifier.device)
    return batches(loader, classifier.settings.batch_size)


def _paths(
    classifier: Classifier, records: list[Record], scales: list[int], size: int, naive_images: int, model_images: int
) -> dict[str, tuple[int, Callable[[], Any]]]:
    """Each measured path: its number of crops and the work."""
    grid, batch = ZoomGrid(scales), classifier.settings.batch_size
    n_t = grid.n_transforms
    ready = torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8)
    model_batches = -(-model_images * n_t // batch)

    def model_only() -> None:
        with torch.inference_mode():
            for _ in range(model_batches):
                classifier.columns(classifier.logits(ready))

    def naive_end_to_end() -> None:
        with torch.inference_mode():
            for x in _naive_loader(classifier, records[:naive_images], scales):
                classifier.model(x.to(classifier.device).contiguous(memory_format=classifier.memory_format)).argmax(1)

    # The device backend is for GPUs: on a CPU its tensor operations are about 10x slower than PIL.
    backends = BACKENDS if classifier.device.type == "cuda" else RESIZE_BACKENDS
    data = {
        f"data_{b}": (len(records) * n_t, lambda b=b: _drain(_data_batches(classifier, records, scales, size, b)))
        for b in backends
    }
    # A predict job starts its DataLoader before its first batch (run_shards), so its worker forks while the job's
    # heap is small. Started only when ``end_to_end`` runs, after the warm-up and the other paths, the worker would
    # share the heap they leave behind (kept by zoomeval.core.allocator) copy-on-write, and every page of it that
    # the model writes again would fault and be copied: about 0.4 M minor faults and 1.5 s of system time for 2
    # images on a CPU, which the predict job does not pay. So the end-to-end stream starts here, before the warm-up
    # (``run`` calls this first), and its worker decodes the first images during the warm-up; its CPU time counts
    # when it exits, at the end of ``end_to_end``.
    shard = records[:model_images]
    started = crop_stream(classifier, shard, grid, "original", None, size)
    return {
        "naive_data": (naive_images * n_t, lambda: _drain(_naive_loader(classifier, records[:naive_images], scales))),
        **data,
        "model": (model_batches * batch, model_only),
        "naive": (naive_images * n_t, naive_end_to_end),
        "end_to_end": (  # run_shard adds the aggregation methods' views
            model_images * grid.n_views(),
            lambda: run_shard(classifier, shard, grid, "original", None, size, started),
        ),
    }


def _ratios(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    rate = {k: v["crops_per_second"] for k, v in results.items()}
    ratios = {
        "end_to_end_over_naive": round(rate["end_to_end"] / rate["naive"], 3),
        "end_to_end_over_model": round(rate["end_to_end"] / rate["model"], 3),
        **{f"{k}_over_naive_data": round(v / rate["naive_data"], 2) for k, v in rate.items() if k.startswith("data_")},
    }
    for k, v in ratios.items():
        print(f"{k}: {v}")
    return ratios


def run(
    records: list[Record],
    classifier: Classifier,
    spec: ModelSpec,
    scales: list[int],
    naive_images: int,
    model_images: int,
) -> dict[str, Any]:
    """Measure every path on ``records`` with ``classifier`` (``spec``'s model)."""
    paths = _paths(classifier, records, scales, spec.input_size, naive_images, model_images)
    ready = torch.zeros((1, spec.input_size, spec.input_size, 3), dtype=torch.uint8)
    with torch.inference_mode():  # warm-up: first batches pay for allocation and kernel selection
        classifier.columns(classifier.logits(ready.expand(classifier.settings.batch_size, -1, -1, -1)))
    results = {name: _measure(name, n_crops, work) for name, (n_crops, work) in paths.items()}
    settings = classifier.settings
    return {
        "model": spec.name,
        "architecture": spec.architecture,
        "device": classifier.device.type,
        "device_name": torch.cuda.get_device_name() if classifier.device.type == "cuda" else platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "settings": {k: getattr(settings, k) for k in ("batch_size", "num_workers", "precision", "resize_backend")},
        "n_scales": len(scales),
        "results": results,
        "ratios": _ratios(results),
        "prediction_columns": [f.name for f in BASE_FIELDS],
    }


def _crops(image: Image.Image, scales: list[int], size: int, backend: str, device: torch.device) -> torch.Tensor:
    if backend == DEVICE_BACKEND:
        return device_crops(torch.from_numpy(np.array(image)).to(device), scales, size)
    return torch.from_numpy(all_crops(image, scales, size, backend))


def parity(classifier: Classifier, records: list[Record], scales: list[int], size: int) -> dict[str, Any]:
    """Each fast backend against ``pil``: the largest pixel difference of any crop, and top-1 agreement of the
    model overall and in the worst transform."""
    worst = dict.fromkeys(BACKENDS[1:], 0)
    top1: dict[str, list[torch.Tensor]] = {b: [] for b in BACKENDS}
    batch = classifier.settings.batch_size
    with torch.inference_mode():
        for record in records:
            with Image.open(record.path) as raw:
                image = raw.convert("RGB")
            crops = {b: _crops(image, scales, size, b, classifier.device) for b in BACKENDS}
            for b in worst:
                worst[b] = max(worst[b], int((crops["pil"].int() - crops[b].cpu().int()).abs().max()))
            for b, c in crops.items():
                top1[b].append(torch.cat([classifier.logits(x).argmax(1) for x in c.split(batch)]))
    reference = torch.stack(top1["pil"]).cpu()  # (images, transforms)
    result: dict[str, Any] = {"images": len(records)}
    for b in worst:
        same = (torch.stack(top1[b]).cpu() == reference).double()
        per_transform = same.mean(dim=0)
        result[b] = {
            "max_abs_diff": worst[b],
            "top1_agreement": round(float(same.mean()), 4),
            "worst_transform_agreement": round(float(per_transform.min()), 4),
            "per_transform": {
                t.name: round(float(a), 4) for t, a in zip(transforms(scales), per_transform, strict=True)
            },
        }
        print(
            f"resize parity {b} vs pil: max abs diff {worst[b]} levels, top-1 agreement {int(same.sum())}/"
            f"{same.numel()}, worst transform {float(per_transform.min()):.4f}",
            flush=True,
        )
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--config", default="config/config.yaml", help="model registry and inference settings")
    parser.add_argument("--model", help="model name in the config (default: the first)")
    parser.add_argument("--random-init", action="store_true", help="torchvision architecture without weights")
    parser.add_argument("--resources", default="resources", help="where downloaded weights are kept")
    parser.add_argument("--images", type=int, default=0, help="cycle the manifest to this many images")
    parser.add_argument("--model-images", type=int, default=4, help="images through the model paths")
    parser.add_argument("--naive-images", type=int, default=2, help="images through the naive paths")
    parser.add_argument("--parity-images", type=int, default=0, help="images for the torch-vs-PIL resize parity")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--num-workers", type=int)
    parser.add_argument("--resize-backend", choices=(*BACKENDS, AUTO_BACKEND), help="for the end-to-end path")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"])
    parser.add_argument(
        "--allocator",
        choices=["tuned", "default"],
        default="tuned",
        help="tuned: keep freed memory as the model jobs do (zoomeval.core.allocator)",
    )
    args = parser.parse_args(argv)
    allocator = "tuned" if args.allocator == "tuned" and keep_freed_memory() else "default"

    config = load_yaml(args.config)
    settings = _settings(config, args)
    torch.set_num_threads(settings.threads or os.cpu_count() or 1)
    classifier, spec = _classifier(config, args, settings)
    records = read_manifest(args.manifest)
    if args.images:
        records = list(itertools.islice(itertools.cycle(records), args.images))
    scales = config.get("scales", paper_scales())
    result = run(records, classifier, spec, scales, args.naive_images, args.model_images) | {"allocator": allocator}
    if args.parity_images:
        result["parity"] = parity(classifier, records[: args.parity_images], scales, spec.input_size)
    write_json(args.out, result)
    print(f"wrote {args.out}")


def _settings(config: dict[str, Any], args: argparse.Namespace) -> InferenceSettings:
    """The config's inference section, with the options given on the command line."""
    keys = ("batch_size", "num_workers", "resize_backend", "precision")
    given = {key: getattr(args, key) for key in keys if getattr(args, key) is not None}
    return InferenceSettings(**{**config.get("inference", {}), **given})


def _classifier(
    config: dict[str, Any], args: argparse.Namespace, settings: InferenceSettings
) -> tuple[Classifier, ModelSpec]:
    """The benchmarked model: the config's, with its weights fetched if needed, or a random-init network."""
    name = args.model or next(iter(config["models"]))
    spec = ModelSpec.from_config(name, config["models"][name])
    if args.random_init:
        import torchvision

        module = torchvision.models.get_model(spec.architecture, weights=None)
        loaded = LoadedModel(module.eval(), None, spec.mean or IMAGENET_MEAN, spec.std or IMAGENET_STD)
        return Classifier(spec, settings, None, loaded=loaded), spec
    return Classifier(spec, settings, None, fetched_weights(spec, args.resources)), spec


if __name__ == "__main__":
    main()
