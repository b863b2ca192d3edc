"""GPU throughput check, run by ``bench/gpu_check.sh``: is the data path fast enough for ImageNet val x 324?

For ResNet-50 and ViT-B/32 (random init: speed does not depend on the weights, and the machine may be offline):

* model alone: the predict loop's shard work (:func:`zoomeval.inference.predict.infer_shard`: normalise, forward,
  the prediction columns and aggregation sums kept on the device, one copy to the host per shard) on ready uint8
  crops already on the device, at the ``--settings`` (default fp32, bf16, and bf16 compiled with inductor freezing;
  also ``bf16_compiled`` and ``bf16_compiled_frozen_cudagraphs``), ``torch._dynamo.reset()`` before each, each with
  its top-1 agreement with fp32 on real crops;
* end to end: the same loop fed by the data path (``resize_backend: device``, the last model setting) over
  synthetic JPEGs at the paper's 36 scales, as one shard and as a job of ``--shards`` shards (one DataLoader,
  background writes), with the GPU utilisation sampled by ``nvidia-smi`` and the host waits inside a shard counted
  by ``torch.cuda.set_sync_debug_mode``;
* their ratio, and the projected time of ImageNet val (50,000 images x 333 views, and x 324) per model.

The image sizes follow :func:`image_sizes`: an assumed long-tailed distribution (not ImageNet's measured
histogram), half of them the frequent 500 px sizes, the rest spread up to 2,800 px on the long side. Before the
models it checks on the device that the device path's crops equal the PIL path's bit for bit (images of every
size class, a tall and a wide one), with the fused Triton kernel per pass that the workflow runs on a GPU and with
the plain torch passes, and measures the device path per size class: device operations and bytes moved, CPU time
to enqueue them, device time, crops per second and the host time to build a new size's plan (done in the
DataLoader workers); the plain passes' figures come last, for comparison. The JSON is written again after every
figure, so a run stopped early keeps what it measured. ``--cpu-smoke`` runs the same code on the CPU with tiny
settings (no compile; the fused kernel's parity in Triton's interpreter), to check the script itself.
Writes ``results/bench/gpu.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.io import write_json
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid, all_crops, n_views, paper_scales
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_plan import build_plan
from zoomeval.inference.device_resize import Resample, device_crops, pass_for, plan_crops, resample_pass
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel
from zoomeval.inference.predict import crop_stream, infer_shard, run_shards
from zoomeval.inference.shards import ShardStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.throughput_bench import run_shard  # noqa: E402 (the benchmarks' shard)
from tests.device_ops import DeviceOps, counted  # noqa: E402 (the tests' counting probes)

IMAGENET_VAL = 50_000
#: Frequent ImageNet val sizes (width, height).
IMAGENET_SIZES = ((500, 375), (375, 500), (500, 333), (500, 400), (333, 500))
#: Size classes by the longer side: frequent (the sizes above), other up to 1,000 px, large above.
SIZE_CLASSES = ("frequent", "other", "large")
#: torchvision architectures checked by default (any other can be named with --models).
MODELS = ("resnet50", "vit_b_32")
#: (label, precision, compile, inductor options) of the model-alone measurements; the last that works here is the
#: end-to-end setting. Freezing folds BatchNorm into the convolutions; CUDA graphs replay the fixed batch shape.
MODEL_SETTINGS: tuple[tuple[str, str, bool, dict[str, Any] | None], ...] = (  # the default: DEFAULT_SETTINGS
    ("fp32", "fp32", False, None),
    ("bf16", "bf16", False, None),
    ("bf16_compiled", "bf16", True, None),
    ("bf16_compiled_frozen", "bf16", True, {"freezing": True}),
    ("bf16_compiled_frozen_cudagraphs", "bf16", True, {"freezing": True, "triton.cudagraphs": True}),
)
#: The settings measured unless ``--settings`` names others: each compilation costs a minute, and the check must
#: end within 6 minutes.
DEFAULT_SETTINGS = "fp32,bf16,bf16_compiled_frozen"


def image_sizes(n: int, seed: int = 0) -> list[tuple[int, int]]:
    """``n`` (width, height) pairs: half the frequent sizes in turn, 35 % other landscape or portrait sizes with
    the longer side 300-1,000 px, 15 % large ones with the longer side 1,000-2,800 px (a third of those >= 2,000);
    aspect ratios 1.0-1.8. An assumed distribution with ImageNet's long tail, not its measured histogram."""
    rng, sizes = np.random.default_rng(seed), []
    for k in range(n):
        kind = k % 20
        if kind < 10:
            sizes.append(IMAGENET_SIZES[k // 20 % len(IMAGENET_SIZES)])
            continue
        long_side = int(rng.integers(300, 1001)) if kind < 17 else int(rng.integers(1000, 2801))
        long_side = max(long_side, 2000) if kind == 19 else long_side
        short = int(long_side / rng.uniform(1.0, 1.8))
        sizes.append((long_side, short) if rng.random() < 0.7 else (short, long_side))
    return sizes


def size_class(width: int, height: int) -> str:
    if (width, height) in IMAGENET_SIZES:
        return SIZE_CLASSES[0]
    return SIZE_CLASSES[1] if max(width, height) <= 1000 else SIZE_CLASSES[2]


def synthetic_jpegs(folder: Path, sizes: list[tuple[int, int]], prefix: str = "img") -> list[Record]:
    """JPEGs (quality 90) of smooth colour fields with noise, so they compress and decode like photos."""
    rng, records = np.random.default_rng(0), []
    for k, (width, height) in enumerate(sizes):
        coarse = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR), np.int16)
        pixels = (smooth + rng.integers(-12, 13, smooth.shape)).clip(0, 255).astype(np.uint8)
        path = folder / f"{prefix}{k:05d}.jpg"
        Image.fromarray(pixels).save(path, quality=90)
        records.append(Record(f"{prefix}{k:05d}", str(path), [k % 1000], ["n00000000"], width, height))
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


def model_alone(classifier: Classifier, scales: list[int], seconds: float, images: int) -> float:
    """Crops per second of the predict loop's shard work (:func:`infer_shard`, as end to end) on ready uint8 crops
    already on the device: one copy to the host per shard of ``images`` images, none per batch."""
    size, views = 224, n_views(scales, True)
    ready = torch.randint(0, 256, (views, size, size, 3), dtype=torch.uint8, device=classifier.device)
    records = [Record(f"r{k}", "", [0], ["n00000000"], size, size) for k in range(images)]

    def shard() -> None:
        infer_shard(classifier, ((k, ready) for k in range(len(records))), records, ZoomGrid(scales)).wait()

    shard()  # warm-up: compilation, kernel selection, allocation
    start, done = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        shard()
        done += len(records) * views
    return done / (time.perf_counter() - start)


def top1(classifier: Classifier, crops: torch.Tensor) -> torch.Tensor:
    """The argmax over all classes of each of ``crops``, a batch at a time."""
    with torch.inference_mode():
        return torch.cat([classifier.logits(c).argmax(1).cpu() for c in crops.split(classifier.settings.batch_size)])


def shard_waits(classifier: Classifier, records: list[Record], scales: list[int]) -> int | None:
    """The host waits for the GPU inside one shard's loop (``torch.cuda.set_sync_debug_mode``); None on a CPU."""
    if classifier.device.type != "cuda":
        return None
    images = crop_stream(classifier, records, ZoomGrid(scales), "original", None, 224)
    first = next(images)  # the DataLoader's start and the first crops are not the loop's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            copy = infer_shard(classifier, itertools.chain([first], images), records, ZoomGrid(scales))
        finally:
            torch.cuda.set_sync_debug_mode("default")
    copy.wait()
    return sum("synchroniz" in str(w.message) for w in caught)


def end_to_end(classifier: Classifier, records: list[Record], scales: list[int], shards: int) -> dict[str, Any]:
    """Crops per second (aggregation views included) of the predict loop as one shard and as a job of ``shards``
    shards (one DataLoader, shards written in the background), and the mean GPU utilisation over the latter."""
    views = n_views(scales, True)
    _, _, seconds = run_shard(classifier, records, ZoomGrid(scales), "original", None, 224)
    one = len(records) * views / seconds
    with tempfile.TemporaryDirectory() as folder:
        store = ShardStore(Path(folder) / "predictions.parquet", Path(folder) / "aggregates.parquet")
        pending = list(store.pending(records, -(-len(records) // shards), {}))
        with store.locked(), GpuSampler() as gpu:
            seconds = run_shards(classifier, store, pending, ZoomGrid(scales), "original", None, 224)
    return {
        "end_to_end": len(records) * views / seconds,
        "end_to_end_one_shard": one,
        "shards": len(pending),
        "gpu_utilisation": gpu.mean(),
    }


def parity_images(records: list[Record], folder: Path) -> list[Path]:
    """Two synthetic JPEGs of each size class, a tall image (160 x 400: Pillow 13 shrinks its height first) and a
    wide one."""
    chosen = [[r for r in records if size_class(r.width, r.height) == c][:2] for c in SIZE_CLASSES]
    extra = synthetic_jpegs(folder, [(160, 400), (500, 120)], prefix="parity")
    return [Path(r.path) for r in [*itertools.chain(*chosen), *extra]]


def pixel_parity(paths: list[Path], scales: list[int], device: torch.device, resample: Resample) -> int:
    """The largest difference (grey levels) between the device path's crops on ``device`` and the PIL path's."""
    worst = 0
    for path in paths:
        with Image.open(path) as raw:
            image = raw.convert("RGB")
        reference = torch.from_numpy(all_crops(image, scales, extra_views=True)).int()
        plan = build_plan(image.width, image.height, tuple(scales), 224, True).to(device)
        crops = plan_crops(torch.from_numpy(np.array(image)).to(device), plan, resample)
        worst = max(worst, int((crops.cpu().int() - reference).abs().max()))
    return worst


def crop_cost(records: list[Record], scales: list[int], device: torch.device, resample: Resample) -> dict[str, Any]:
    """The device path alone on ``records`` (one size class), their plans built beforehand as the workers build
    them: device operations and bytes moved per image (counted on the ``meta`` device), CPU milliseconds to enqueue
    an image, device milliseconds (CUDA events; the CPU time on a CPU), crops per second, and the host milliseconds
    to build a new size's plan."""
    images, plan_ms = [], 0.0
    for record in records:
        with Image.open(record.path) as raw:
            pixels = torch.from_numpy(np.array(raw.convert("RGB")))
        start = time.perf_counter()
        plan = build_plan(pixels.shape[1], pixels.shape[0], tuple(scales), 224, True)
        plan_ms += (time.perf_counter() - start) * 1000
        images.append((pixels.to(device), plan.to(device)))
    plan_crops(*images[0], resample)  # warm-up: allocations (and compilation)
    with DeviceOps() as ops:
        meta = torch.device("meta")
        counting = resample if resample is resample_pass else counted(ops)
        plan_crops(images[0][0].to(meta), images[0][1].to(meta), counting)
    _sync(device)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if device.type == "cuda" else None
    if events:
        events[0].record()
    start = time.perf_counter()
    for pixels, plan in images:
        plan_crops(pixels, plan, resample)
    enqueue = (time.perf_counter() - start) / len(images)
    device_s = enqueue
    if events:
        events[1].record()
        events[1].synchronize()
        device_s = events[0].elapsed_time(events[1]) / 1000 / len(images)
    return {
        "images": len(images),
        "device_ops": len(ops.ops),
        "gb_moved": round(ops.bytes / 1e9, 3),
        "enqueue_ms": round(enqueue * 1000, 2),
        "device_ms": round(device_s * 1000, 2),
        "crops_per_s": round(n_views(scales, True) / device_s, 1),
        "plan_ms": round(plan_ms / len(images), 1),
    }


def check_model(
    name: str,
    records: list[Record],
    scales: list[int],
    args: argparse.Namespace,
    save: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Every measurement of one model; prints them as they come and saves the figures so far after each."""
    import torchvision

    spec = ModelSpec(name, "torchvision", name, "random-init")
    module = torchvision.models.get_model(name, weights=None).eval()
    loaded = LoadedModel(module, None, IMAGENET_MEAN, IMAGENET_STD)
    with Image.open(records[0].path) as raw:
        pixels = torch.from_numpy(np.array(raw.convert("RGB"))).to(args.device)
    crops = device_crops(pixels, scales, extra_views=True)  # real crops for the top-1 agreement
    result: dict[str, Any] = {"model_alone": {}, "top1_agreement_with_fp32": {}}
    reference, last = None, None
    chosen = args.settings.split(",")
    for label, precision, compile_, options in [s for s in MODEL_SETTINGS if s[0] in chosen]:
        torch._dynamo.reset()  # each setting compiles afresh: no recompile limit, no silent fallback to eager
        settings = InferenceSettings(
            batch_size=args.batch_size,
            device=args.device,
            num_workers=args.workers,
            precision=precision,
            resize_backend="device",
            compile=compile_,
        )
        try:
            classifier = Classifier(spec, settings, None, loaded=loaded, compile_options=options)
            rate = model_alone(classifier, scales, args.seconds, 1 if args.cpu_smoke else 16)
            predicted = top1(classifier, crops)
        except Exception as exc:  # one setting that does not work here must not hide the others' figures
            result["model_alone"][label] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
            print(f"{name}: model alone {label}: {result['model_alone'][label]}", flush=True)
            save(result)
            continue
        reference = predicted if reference is None else reference
        agreement = float((predicted == reference).double().mean())
        result["model_alone"][label] = round(rate, 1)
        result["top1_agreement_with_fp32"][label] = round(agreement, 4)
        print(
            f"{name}: model alone {label}: {rate:,.0f} crops/s, top-1 agreement with fp32 {agreement:.4f}", flush=True
        )
        save(result)
        last = (label, classifier)
    if last is None:
        raise RuntimeError(f"{name}: no model setting worked here: {result['model_alone']}")
    label, classifier = last
    loop = end_to_end(classifier, records, scales, args.shards)
    waits = shard_waits(classifier, records[: max(1, len(records) // args.shards)], scales)
    rate, best = loop["end_to_end"], result["model_alone"][label]
    minutes = IMAGENET_VAL * n_views(scales, True) / rate / 60
    result |= {
        "end_to_end_setting": label,
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in loop.items()},
        "end_to_end_over_model": round(rate / best, 3),
        "shards_over_one_shard": round(rate / loop["end_to_end_one_shard"], 3),
        "host_waits_per_shard": waits,
        "imagenet_val_minutes": round(minutes, 1),
        "imagenet_val_324_minutes": round(IMAGENET_VAL * ZoomGrid(scales).n_transforms / rate / 60, 1),
        "device_crops_over_model": {c: round(cost["crops_per_s"] / best, 2) for c, cost in args.crop_costs.items()},
    }
    save(result)
    gpu = loop["gpu_utilisation"]
    print(
        f"{name}: end to end ({label}, device resize, {loop['shards']} shards): {rate:,.0f} crops/s = "
        f"{rate / best:.2f} x model alone, {result['shards_over_one_shard']:.2f} x one shard "
        f"({loop['end_to_end_one_shard']:,.0f} crops/s); host waits in a shard: "
        f"{waits if waits is not None else 'n/a'}; GPU {gpu if gpu is not None else 'n/a'}%; ImageNet val x "
        f"{n_views(scales, True)} views: {minutes:.1f} min, x {ZoomGrid(scales).n_transforms}: "
        f"{result['imagenet_val_324_minutes']:.1f} min; device crops alone over the model: "
        f"{result['device_crops_over_model']}",
        flush=True,
    )
    return result


def crop_costs(
    costs: dict[str, dict[str, Any]],
    records: list[Record],
    scales: list[int],
    device: torch.device,
    args: argparse.Namespace,
    save: Callable[[], None],
    resample: Resample,
) -> dict[str, dict[str, Any]]:
    """:func:`crop_cost` per size class (two images each in the smoke run, twelve on a GPU) into ``costs`` (part
    of the report), saved and printed as they come."""
    kind = "plain" if resample is resample_pass else "fused"
    for c in SIZE_CLASSES:
        chosen = [r for r in records if size_class(r.width, r.height) == c][: 2 if args.cpu_smoke else 12]
        if not chosen:
            continue
        cost = costs[c] = crop_cost(chosen, scales, device, resample)
        save()
        print(
            f"device crops ({kind} passes), {c} sizes ({cost['images']} images): {cost['crops_per_s']:,.0f} crops/s, "
            f"{cost['device_ops']} device operations moving {cost['gb_moved']} GB, {cost['enqueue_ms']} ms to "
            f"enqueue, {cost['device_ms']} ms "
            f"on the device per image; a new size's plan {cost['plan_ms']} ms (in the workers)",
            flush=True,
        )
    return costs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny run on the CPU, to check the script")
    parser.add_argument("--models", default=",".join(MODELS), help="torchvision architectures, comma-separated")
    parser.add_argument(
        "--settings",
        default=DEFAULT_SETTINGS,
        help="model settings, comma-separated: " + ", ".join(s[0] for s in MODEL_SETTINGS),
    )
    parser.add_argument("--images", type=int, default=300, help="synthetic JPEGs end to end")
    parser.add_argument("--shards", type=int, default=3, help="shards of the end-to-end job")
    # One image's views per batch: every batch has the same shape, so torch.compile never recompiles.
    parser.add_argument("--batch-size", type=int, default=333)
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--seconds", type=float, default=4.0, help="per model-alone measurement")
    parser.add_argument("--out", default="results/bench/gpu.json")
    args = parser.parse_args(argv)
    if args.cpu_smoke:  # the fused kernel's parity in Triton's interpreter, chosen before triton is imported
        os.environ["TRITON_INTERPRET"] = "1"
    from zoomeval.inference.fused_pass import fused_pass  # after choosing Triton's mode

    keep_freed_memory()
    args.device = "cpu" if args.cpu_smoke else "cuda"
    if args.cpu_smoke:
        args.images, args.batch_size, args.workers, args.seconds, args.settings = 2, 18, 1, 0.5, "fp32,bf16"
    scales = [256] if args.cpu_smoke else paper_scales()
    sizes = [(500, 375), (1200, 90)] if args.cpu_smoke else image_sizes(args.images)
    device = torch.device(args.device)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "images": args.images,
        "scales": scales,
        "batch_size": args.batch_size,
        "workers": args.workers,
        "image_sizes": {c: sum(size_class(*s) == c for s in sizes) for c in SIZE_CLASSES},
        "models": {},
    }

    def save(figures: dict[str, Any] | None = None, model: str | None = None) -> None:
        if model is not None:
            report["models"][model] = figures
        write_json(args.out, report)

    with tempfile.TemporaryDirectory() as folder:
        records = synthetic_jpegs(Path(folder), sizes)
        parity = report["max_abs_pixel_diff"] = {}
        for kind, resample in (("fused", fused_pass), ("plain", resample_pass)):
            parity[kind] = pixel_parity(parity_images(records, Path(folder)), scales, device, resample)
            save()
        where = " (the fused kernel in Triton's interpreter)" if args.cpu_smoke else ""
        print(
            f"device crops vs PIL crops (two images per size class, a tall and a wide one): max abs diff "
            f"{parity} grey levels{where}",
            flush=True,
        )
        resample = pass_for(device)  # what the workflow runs here
        args.crop_costs = crop_costs(
            report.setdefault("device_crops_per_image", {}), records, scales, device, args, save, resample
        )
        for name in args.models.split(","):
            check_model(name, records, scales, args, lambda figures, name=name: save(figures, name))
        if resample is not resample_pass:  # last: the plain passes, for comparison
            crop_costs(
                report.setdefault("plain_device_crops_per_image", {}),
                records,
                scales,
                device,
                args,
                save,
                resample_pass,
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
