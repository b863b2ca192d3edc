"""GPU throughput check, run by ``bench/gpu_check.sh``: is the data path fast enough for ImageNet val x 324?

For ResNet-50 and ViT-B/32 (random init: speed does not depend on the weights, and the machine may be offline):

* model alone on ready uint8 batches already on the device (normalise + forward + the prediction columns), at
  fp32, bf16 and bf16 with ``torch.compile``;
* end to end: this project's predict loop (:func:`zoomeval.inference.predict.run_shard`, ``resize_backend:
  device``, the fastest model setting) over synthetic ImageNet-sized JPEGs at the paper's 36 scales, with the
  GPU utilisation sampled by ``nvidia-smi``;
* their ratio, and the projected time of ImageNet val (50,000 images x 333 views) per model and variant.

Before that it checks on the device that the device path's crops equal the PIL path's bit for bit.
``--cpu-smoke`` runs the same code on the CPU with tiny settings (no compile), to check the script itself.
Writes ``results/bench/gpu.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import write_json
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import all_crops, n_views, paper_scales
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crops import device_crops
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel
from zoomeval.inference.predict import run_shard

IMAGENET_VAL = 50_000
#: Frequent ImageNet val sizes (width, height).
IMAGENET_SIZES = ((500, 375), (375, 500), (500, 333), (500, 400), (333, 500))
#: torchvision architectures checked by default (any other can be named with --models).
MODELS = ("resnet50", "vit_b_32")
#: (label, precision, compile) of the model-alone measurements; the last is the end-to-end setting.
MODEL_SETTINGS = (("fp32", "fp32", False), ("bf16", "bf16", False), ("bf16_compiled", "bf16", True))


def synthetic_jpegs(folder: Path, n: int, sizes: tuple[tuple[int, int], ...]) -> list[Record]:
    """``n`` JPEGs (quality 90) of smooth colour fields with noise, so they compress and decode like photos."""
    rng, records = np.random.default_rng(0), []
    for k in range(n):
        width, height = sizes[k % len(sizes)]
        coarse = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR), np.int16)
        pixels = (smooth + rng.integers(-12, 13, smooth.shape)).clip(0, 255).astype(np.uint8)
        path = folder / f"img{k:05d}.jpg"
        Image.fromarray(pixels).save(path, quality=90)
        records.append(Record(f"img{k:05d}", str(path), [k % 1000], ["n00000000"], width, height))
    return records


class GpuSampler:
    """Samples ``nvidia-smi``'s utilisation of the first visible GPU every quarter second while in use."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> GpuSampler:
        if shutil.which("nvidia-smi") and torch.cuda.is_available():
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def _sample(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
        query += ["-i", visible] if visible else []
        while not self.stop.wait(0.25):
            out = subprocess.run(query, capture_output=True, text=True, check=False)
            if out.returncode == 0 and out.stdout.split():
                self.samples.append(float(out.stdout.split()[0]))

    def mean(self) -> float | None:
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_alone(classifier: Classifier, seconds: float) -> float:
    """Crops per second of normalise + forward + prediction columns on a ready uint8 batch on the device."""
    size, batch = 224, classifier.settings.batch_size
    ready = torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8, device=classifier.device)
    with torch.inference_mode():
        for _ in range(3):  # warm-up: compilation, kernel selection, allocation
            classifier.columns(classifier.logits(ready))
        _sync(classifier.device)
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            classifier.columns(classifier.logits(ready))
            done += batch
        _sync(classifier.device)
    return done / (time.perf_counter() - start)


def end_to_end(classifier: Classifier, records: list[Record], scales: list[int]) -> tuple[float, float | None]:
    """Crops per second (aggregation views included) of the predict loop, and the mean GPU utilisation."""
    with GpuSampler() as gpu:
        _, _, seconds = run_shard(classifier, records, scales, "original", None, 224)
    return len(records) * n_views(scales, True) / seconds, gpu.mean()


def pixel_parity(records: list[Record], scales: list[int], device: torch.device) -> int:
    """The largest difference (grey levels) between the device path's crops on ``device`` and the PIL path's."""
    worst = 0
    for record in records:
        with Image.open(record.path) as raw:
            image = raw.convert("RGB")
        reference = torch.from_numpy(all_crops(image, scales, extra_views=True)).int()
        crops = device_crops(torch.from_numpy(np.array(image)).to(device), scales, extra_views=True)
        worst = max(worst, int((crops.cpu().int() - reference).abs().max()))
    return worst


def check_model(name: str, records: list[Record], scales: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement of one model; prints them as they come."""
    import torchvision

    spec = ModelSpec(name, "torchvision", name, "random-init")
    module = torchvision.models.get_model(name, weights=None).eval()
    loaded = LoadedModel(module, None, IMAGENET_MEAN, IMAGENET_STD)
    result: dict[str, Any] = {"model_alone": {}}
    for label, precision, compile_ in MODEL_SETTINGS if not args.cpu_smoke else MODEL_SETTINGS[:2]:
        settings = InferenceSettings(batch_size=args.batch_size, device=args.device, num_workers=args.workers,
                                     precision=precision, resize_backend="device", compile=compile_)  # fmt: skip
        classifier = Classifier(spec, settings, None, loaded=loaded)
        rate = model_alone(classifier, args.seconds)
        result["model_alone"][label] = round(rate, 1)
        print(f"{name}: model alone {label}: {rate:,.0f} crops/s", flush=True)
    rate, gpu = end_to_end(classifier, records, scales)  # with the last (fastest) setting
    best = result["model_alone"][label]
    minutes = IMAGENET_VAL * n_views(scales, True) / rate / 60
    result |= {"end_to_end_setting": label, "end_to_end": round(rate, 1), "gpu_utilisation": gpu,
               "end_to_end_over_model": round(rate / best, 3), "imagenet_val_minutes": round(minutes, 1)}  # fmt: skip
    print(f"{name}: end to end ({label}, device resize): {rate:,.0f} crops/s = {rate / best:.2f} x model alone, "
          f"GPU {gpu if gpu is not None else 'n/a'}%; ImageNet val x {n_views(scales, True)} views: "
          f"{minutes:.1f} min", flush=True)  # fmt: skip
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny run on the CPU, to check the script")
    parser.add_argument("--models", default=",".join(MODELS), help="torchvision architectures, comma-separated")
    parser.add_argument("--images", type=int, default=512, help="synthetic JPEGs end to end")
    # One image's views per batch: every batch has the same shape, so torch.compile never recompiles.
    parser.add_argument("--batch-size", type=int, default=333)
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--seconds", type=float, default=5.0, help="per model-alone measurement")
    parser.add_argument("--out", default="results/bench/gpu.json")
    args = parser.parse_args(argv)
    keep_freed_memory()
    args.device = "cpu" if args.cpu_smoke else "cuda"
    if args.cpu_smoke:
        args.images, args.batch_size, args.workers, args.seconds = 2, 18, 1, 0.5
    scales = [256] if args.cpu_smoke else paper_scales()
    sizes = ((160, 120),) if args.cpu_smoke else IMAGENET_SIZES
    with tempfile.TemporaryDirectory() as folder:
        records = synthetic_jpegs(Path(folder), args.images, sizes)
        report: dict[str, Any] = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                                  "torch": torch.__version__, "images": args.images, "scales": scales,
                                  "batch_size": args.batch_size, "workers": args.workers}  # fmt: skip
        report["max_abs_pixel_diff"] = pixel_parity(records[:4], scales, torch.device(args.device))
        print(f"device crops vs PIL crops: max abs diff {report['max_abs_pixel_diff']} grey levels", flush=True)
        report["models"] = {name: check_model(name, records, scales, args) for name in args.models.split(",")}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
