"""What an audit (``zoomeval audit``) costs per row on this machine's CPU, and how far an fp16 or bf16 run's logits
lie from an fp32 run's (what the audit's tolerance, ``zoomeval.audit.study.LOGIT_ERROR``, rests on).

Each timed row is a different demo image at a random scale of the paper's 36 and a random anchor, recomputed as the
audit does (:func:`zoomeval.inference.recompute.zoom_logits`: decode, resize to that scale, the crops cut, one of them
through the model), so that no decode or resize is shared between rows, as in a sample of a large study. The model is
the demo's EfficientNet-Lite0 and, for scale, torchvision's ResNet-50 (random weights: the cost of a forward pass does
not depend on them). The precision figures are the largest differences between the logits of the same crops at fp32
and at bf16 or fp16 (CPU autocast), over all 1000 classes, and the largest gap, in log-probability, by which a top-1
that changed lost to the fp32 top-1.

Usage: ``PYTHONPATH=src python bench/audit_cost.py [--rows N] [--threads T] [--precision-rows N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from zoomeval.audit.files import log_softmax
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.images import screen
from zoomeval.core.zoom import paper_scales
from zoomeval.datasets.adapters.demo import build_demo
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel
from zoomeval.inference.recompute import zoom_logits
from zoomeval.inference.sources import embedded

LITE0 = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE, 224, embedded.MEAN, embedded.STD)
RESNET50 = ModelSpec("resnet50", "torchvision", "resnet50", "IMAGENET1K_V1")


def rows(records: list, count: int, seed: int = 0) -> list[tuple]:
    """``count`` rows ``(record, scale, row, col)`` at random scales and anchors, cycling through the images."""
    rng, scales = np.random.default_rng(seed), paper_scales()
    return [
        (records[k % len(records)], int(rng.choice(scales)), int(rng.integers(3)), int(rng.integers(3)))
        for k in range(count)
    ]


def seconds_per_row(classifier: Classifier, sample: list[tuple]) -> tuple[float, float]:
    """Wall and CPU seconds (this process, all its threads) per row, each row recomputed on its own (no decode
    shared). On a machine shared with other work the CPU figure is the one to compare."""
    zoom_logits(classifier, sample[:1], "original", None, 224)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    for row in sample:
        zoom_logits(classifier, [row], "original", None, 224)
    return (time.perf_counter() - wall) / len(sample), (time.process_time() - cpu) / len(sample)


def decode_seconds(sample: list[tuple]) -> tuple[float, float]:
    """Wall and CPU seconds per row of the decode, variant and resize at the row's scale, and the crops cut (what
    stays on the host when the model runs on a GPU)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for record, scale, *_ in sample:
        ZoomCrops([record], [scale], size=224)[0]
    return (time.perf_counter() - wall) / len(sample), (time.process_time() - cpu) / len(sample)


def precision_gap(records: list, settings: InferenceSettings, count: int) -> dict[str, dict[str, float]]:
    """Per precision, the largest logit difference from fp32 and the largest log-probability gap of a changed top-1."""
    sample = rows(records, count, seed=1)
    reference = zoom_logits(Classifier(LITE0, settings, None), sample, "original", None, 224)
    out = {}
    for precision in ("bf16", "fp16"):
        logits = zoom_logits(
            Classifier(LITE0, replace(settings, precision=precision), None), sample, "original", None, 224
        )
        changed = logits.argmax(1) != reference.argmax(1)
        gaps = [
            float(lp.max() - lp[c])
            for lp, c in zip(map(log_softmax, reference[changed]), logits[changed].argmax(1), strict=True)
        ]
        out[precision] = {
            "max_logit_difference": float(np.abs(logits - reference).max()),
            "top1_changed": int(changed.sum()),
            "max_gap_of_a_changed_top1": max(gaps, default=0.0),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=24, help="rows timed per model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision-rows", type=int, default=48, help="rows compared across precisions")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = InferenceSettings(device="cpu", num_workers=0, threads=args.threads, resize_backend="pil")
    with tempfile.TemporaryDirectory() as tmp:
        records, _ = screen(
            build_demo(Path(tmp) / "images"),
            "fail",
            Path(tmp) / "bad.csv",
            dataset="demo",
            max_scale=max(paper_scales()),
        )
        sample = rows(records, args.rows)
        import torchvision

        resnet = LoadedModel(torchvision.models.resnet50(weights=None).eval(), None, IMAGENET_MEAN, IMAGENET_STD)
        for name, classifier in (
            ("efficientnet_lite0", Classifier(LITE0, settings, None)),
            ("resnet50 (random weights)", Classifier(RESNET50, settings, None, loaded=resnet)),
        ):
            wall, cpu = seconds_per_row(classifier, sample)
            print(f"{name}: {wall:.3f} s wall, {cpu:.3f} s CPU per row ({args.threads} threads)")
        wall, cpu = decode_seconds(sample)
        print(f"decode and resize alone (the CPU's part of a GPU audit): {wall:.3f} s wall, {cpu:.3f} s CPU per row")
        for precision, figures in precision_gap(records, settings, args.precision_rows).items():
            print(f"{precision} against fp32 ({args.precision_rows} rows, efficientnet_lite0): {figures}")


if __name__ == "__main__":
    main()
