"""Throughput benchmark: the authors' per-transform data path against this project's, and the model limit.

Measured in one run, on the same images and model:

* ``naive_data``: the authors' way, one (image, transform) sample at a time: decode, torchvision
  ``Resize(S, BICUBIC)``, crop, ``ToTensor`` and ``Normalize`` in DataLoader workers, batched;
* ``data``: this project's data path alone: decode once, resize once per scale, cut nine crops, batch
  uint8 crops across images (normalisation happens on the device, inside ``model``);
* ``model``: the model alone on ready uint8 batches (normalise + forward): the limit;
* ``naive``: the naive data path feeding the model;
* ``end_to_end``: this project's inference path (:func:`zoomeval.inference.run_shard`), counting the
  aggregation methods' nine extra views per image as crops.

Usage: ``python -m zoomeval.inference.bench --manifest results/datasets/demo/manifest.parquet``
``--out results/bench/cpu.json``
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import time
from collections.abc import Callable, Iterable
from typing import Any

import psutil
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from zoomeval.core.io import write_json
from zoomeval.core.manifest import Record, read_manifest
from zoomeval.core.zoom import RESIZE_BACKENDS, all_crops, crop_box, n_extra_views, paper_scales, transforms
from zoomeval.inference.models import ModelSpec
from zoomeval.inference.predict import BASE_FIELDS, Classifier, Settings, ZoomCrops, batches, run_shard


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


def _measure(name: str, n_crops: int, work: Callable[[], Any]) -> dict[str, Any]:
    psutil.cpu_percent(percpu=False)  # resets the counter
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    result = {
        "crops": n_crops,
        "seconds": round(seconds, 3),
        "crops_per_second": round(n_crops / seconds, 2),
        "cpu_percent": psutil.cpu_percent(percpu=False),
    }
    if torch.cuda.is_available():
        try:
            result["gpu_percent"] = torch.cuda.utilization()
        except Exception:  # needs pynvml; utilisation is optional
            result["gpu_percent"] = None
    print(f"{name:>11}: {result['crops_per_second']:9.1f} crops/s  ({n_crops} crops, {seconds:.1f} s, "
          f"CPU {result['cpu_percent']:.0f}%)", flush=True)  # fmt: skip
    return result


def _drain(iterable: Iterable[Any]) -> None:
    for _ in iterable:
        pass


def run(
    records: list[Record],
    spec: ModelSpec,
    settings: Settings,
    scales: list[int],
    naive_images: int,
    model_images: int,
) -> dict[str, Any]:
    torch.set_num_threads(settings.threads or os.cpu_count() or 1)
    classifier = Classifier(spec, settings, None)
    n_t = 9 * len(scales)
    workers = settings.num_workers
    loader_options: dict[str, Any] = {"num_workers": workers, "prefetch_factor": 2 if workers else None}

    def naive_loader(subset: list[Record]) -> DataLoader[torch.Tensor]:
        return DataLoader(
            NaiveSamples(subset, scales, **classifier.normalisation), batch_size=settings.batch_size, **loader_options
        )

    def data_loader(subset: list[Record], backend: str) -> Iterable[Any]:
        crops = ZoomCrops(subset, scales, size=spec.input_size, backend=backend)
        loader = DataLoader(crops, batch_size=None, pin_memory=classifier.device.type == "cuda", **loader_options)
        return batches(iter(loader), settings.batch_size)

    ready = torch.randint(0, 256, (settings.batch_size, spec.input_size, spec.input_size, 3), dtype=torch.uint8)
    model_crops = model_images * n_t
    model_batches = -(-model_crops // settings.batch_size)

    def model_only() -> None:
        with torch.inference_mode():
            for _ in range(model_batches):
                classifier.columns(classifier.logits(ready))

    def naive_end_to_end() -> None:
        with torch.inference_mode():
            for x in naive_loader(records[:naive_images]):
                classifier.model(x.to(classifier.device).contiguous(memory_format=torch.channels_last)).argmax(1)

    with torch.inference_mode():  # warm-up: first batches pay for allocation and kernel selection
        classifier.columns(classifier.logits(ready))
    results = {
        "naive_data": _measure("naive_data", naive_images * n_t, lambda: _drain(naive_loader(records[:naive_images]))),
        **{
            f"data_{backend}": _measure(
                f"data_{backend}", len(records) * n_t, lambda b=backend: _drain(data_loader(records, b))
            )
            for backend in RESIZE_BACKENDS
        },
        "model": _measure("model", model_batches * settings.batch_size, model_only),
        "naive": _measure("naive", naive_images * n_t, naive_end_to_end),
        "end_to_end": _measure(
            "end_to_end",
            model_images * (n_t + n_extra_views(scales)),  # run_shard adds the aggregation methods' views
            lambda: run_shard(classifier, records[:model_images], scales, "original", None, spec.input_size),
        ),
    }
    rate = {k: v["crops_per_second"] for k, v in results.items()}
    ratios = {
        "end_to_end_over_naive": round(rate["end_to_end"] / rate["naive"], 3),
        "end_to_end_over_model": round(rate["end_to_end"] / rate["model"], 3),
        **{f"data_{b}_over_naive_data": round(rate[f"data_{b}"] / rate["naive_data"], 2) for b in RESIZE_BACKENDS},
    }
    for k, v in ratios.items():
        print(f"{k}: {v}")
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
        "ratios": ratios,
        "prediction_columns": [f.name for f in BASE_FIELDS],
    }


def parity(classifier: Classifier, records: list[Record], scales: list[int], size: int) -> dict[str, Any]:
    """Resize parity of the ``torch`` backend against ``pil``: pixels of every crop and top-1 of the model."""
    max_diff, agree, total = 0, 0, 0
    with torch.inference_mode():
        for record in records:
            with Image.open(record.path) as raw:
                image = raw.convert("RGB")
            crops = {b: torch.from_numpy(all_crops(image, scales, size, b)) for b in RESIZE_BACKENDS}
            max_diff = max(max_diff, int((crops["pil"].int() - crops["torch"].int()).abs().max()))
            preds = {
                b: torch.cat([classifier.logits(c).argmax(1) for c in crops[b].split(classifier.settings.batch_size)])
                for b in RESIZE_BACKENDS
            }
            agree += int((preds["pil"] == preds["torch"]).sum())
            total += len(preds["pil"])
    result = {"images": len(records), "max_abs_diff": max_diff, "top1_agreement": round(agree / total, 4)}
    print(f"resize parity torch vs pil: max abs diff {max_diff} levels, top-1 agreement {agree}/{total}", flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--config", default="config/config.yaml", help="model registry and inference settings")
    parser.add_argument("--model", help="model name in the config (default: the first)")
    parser.add_argument("--random-init", action="store_true", help="torchvision architecture without weights")
    parser.add_argument("--images", type=int, default=0, help="cycle the manifest to this many images")
    parser.add_argument("--model-images", type=int, default=4, help="images through the model paths")
    parser.add_argument("--naive-images", type=int, default=2, help="images through the naive paths")
    parser.add_argument("--parity-images", type=int, default=0, help="images for the torch-vs-PIL resize parity")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--num-workers", type=int)
    parser.add_argument("--resize-backend", choices=["pil", "torch"])
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"])
    args = parser.parse_args(argv)

    import yaml

    config = yaml.safe_load(open(args.config))
    name = args.model or next(iter(config["models"]))
    spec = ModelSpec.from_config(name, config["models"][name])
    if args.random_init:
        spec = ModelSpec(name, "random_init", spec.architecture, "", spec.input_size)
    options = {**config.get("inference", {})}
    for key in ("batch_size", "num_workers", "resize_backend", "precision"):
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    settings = Settings(**{k: v for k, v in options.items() if k in Settings.__dataclass_fields__})
    records = read_manifest(args.manifest)
    if args.images:
        records = list(itertools.islice(itertools.cycle(records), args.images))
    scales = config.get("scales", paper_scales())
    result = run(records, spec, settings, scales, args.naive_images, args.model_images)
    if args.parity_images:
        classifier = Classifier(spec, settings, None)
        result["parity"] = parity(classifier, records[: args.parity_images], scales, spec.input_size)
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
