"""Images per second and forward passes per image of ``zoomeval.ZoomTTA`` against the plain model (the 1-crop view,
one pass per image, through the same crop code), on a finished study's images.

Run ``python bench/zoom_tta_bench.py DIR --fit demo [--limit N] [--budget 4] [--threads 2]`` on a study whose policies
job has run (e.g. the demo: ``zoomeval run DIR --limit 6``); prints one line per policy, timed over ``--repeats``
calls after one warm-up call.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

import zoomeval
from zoomeval.cli.policy import study_settings
from zoomeval.core.layout import run_layout
from zoomeval.core.manifest import read_manifest
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.policy.fitted import export_policy, study_model
from zoomeval.policy.tta import study_classifier


def timed(tta: zoomeval.ZoomTTA, images: list, repeats: int) -> tuple[float, float]:
    """(images per second, mean passes per image) of ``tta`` over ``images``."""
    tta(images)  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        answers = tta(images)
    seconds = (time.perf_counter() - start) / repeats
    return len(images) / seconds, sum(a.passes for a in answers) / len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--fit", required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    layout, settings, variant = run_layout(args.limit), study_settings(args.directory), "original"
    model = study_model(args.directory, layout, args.fit, variant)
    export = dict(
        directory=args.directory, layout=layout, scored=args.fit, variant=variant, model=model, settings=settings
    )
    plain = export_policy(**export, name="max_conf", budget=1)
    records = read_manifest(args.directory / layout.path("manifest", dataset=plain["fitted_on"]["dataset"]))
    records = [dataclasses.replace(r, path=str(args.directory / r.path)) for r in records]
    crops = ZoomCrops(records, plain["model"]["scales"])
    images = [crops.decoded(i) for i in range(len(records))]
    classifier = study_classifier(plain, args.directory / "resources", device="cpu")
    base, _ = timed(zoomeval.ZoomTTA(classifier, plain), images, args.repeats)
    print(f"{len(images)} images, {args.threads} threads; plain model (1-crop): {base:.2f} images/s, 1 pass/image")
    for name in ("max_conf", "vote", "cascade", "selector"):
        rate, passes = timed(
            zoomeval.ZoomTTA(classifier, export_policy(**export, name=name, budget=args.budget)), images, args.repeats
        )
        print(
            f"{name} budget {args.budget}: {rate:.2f} images/s ({rate / base:.2f} x plain), {passes:.2f} passes/image"
        )


if __name__ == "__main__":
    main()
