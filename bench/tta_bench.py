"""Seconds per image of the test-time methods (none, MEMO + AugMix, MEMO + RRC), and of their view generation alone.

Run ``python bench/tta_bench.py`` after the demo dataset exists (``snakemake --cores 2 results/table_tta.csv`` or
``make demo``); prints the figures and writes ``results/bench/tta.json``. ``--models lite0 resnet50`` times the
embedded EfficientNet-Lite0 and a random-init torchvision ResNet-50 (the paper's architecture; timing only, its
predictions mean nothing), each with K = 4 and 16 views, on ``--threads`` CPU threads.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import MemoSettings, ModelSpec
from zoomeval.core.images import load_rgb
from zoomeval.core.manifest import read_manifest
from zoomeval.inference.models import fetch_weights
from zoomeval.inference.sources import embedded
from zoomeval.inference.tta import run_tta_to_file
from zoomeval.inference.tta_views import make_views, view_seed


def model(name: str, folder: Path) -> tuple[ModelSpec, Path | None]:
    """The embedded Lite0, or a random-init torchvision ResNet-50 saved as a checkpoint (the ``checkpoint``
    source) and fetched into ``folder``."""
    if name == "lite0":
        return ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE), None
    import torchvision

    torch.manual_seed(0)
    torch.save(torchvision.models.resnet50().state_dict(), folder / "resnet50.pth")
    spec = ModelSpec(
        "resnet50",
        "checkpoint",
        "resnet50",
        sha256_file(folder / "resnet50.pth"),
        checkpoint=str(folder / "resnet50.pth"),
    )
    fetch_weights(spec, folder / "weights")
    return spec, folder / "weights"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", default="results/datasets/demo/manifest.parquet")
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--views", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--models", nargs="+", default=["lite0"], choices=["lite0", "resnet50"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="results/bench/tta.json")
    args = parser.parse_args()
    records = read_manifest(args.manifest)[: args.images]
    torch.set_num_threads(args.threads)
    figures: dict[str, object] = {
        "images": len(records),
        "threads": args.threads,
        "device": args.device,
        "load_average_before": os.getloadavg(),
    }
    for k in args.views:
        for method in ("memo_augmix", "memo_rrc"):
            start, cpu = time.perf_counter(), time.process_time()
            for r in records:
                make_views(load_rgb(r), method, k, 224, view_seed(0, r.image_id))
            wall = (time.perf_counter() - start) / len(records)
            cpu = (time.process_time() - cpu) / len(records)
            figures[f"views_only/{method}/K={k}"] = {"wall": round(wall, 4), "cpu": round(cpu, 4)}
            print(f"views only, {method}, K={k}: {wall:.3f} s/image wall, {cpu:.3f} CPU")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            spec, weights = model(name, Path(tmp))
            for method, views in [("none", 0), *((m, k) for k in args.views for m in ("memo_augmix", "memo_rrc"))]:
                settings = MemoSettings(views=views or 1)
                out = Path(tmp) / f"{name}-{method}-{views}.parquet"
                meta = run_tta_to_file(
                    out,
                    records,
                    spec,
                    method,
                    "bench",
                    settings,
                    device=args.device,
                    threads=args.threads,
                    weights=weights,
                )
                key = f"{name}/{method}" + (f"/K={views}" if views else "")
                figures[key] = {"wall": meta["seconds_per_image"], "cpu": meta["cpu_seconds_per_image"]}
                print(f"{key}: {meta['seconds_per_image']:.3f} s/image wall, {meta['cpu_seconds_per_image']:.3f} CPU")
    figures["load_average_after"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
