"""Logits recomputed for chosen rows of a prediction or standard-evaluation file, through the code that wrote them:
the model from its recorded entry (:mod:`zoomeval.inference.recorded`, so every source and its weight checks
apply), the zoom crops from :func:`zoomeval.inference.predict.crop_stream` and the standard evaluation's images
from :class:`zoomeval.inference.standard_eval.StandardImages`, each batch through
:class:`~zoomeval.inference.classifier.Classifier`. What an audit compares them with is its business
(:mod:`zoomeval.audit.study`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from zoomeval.core.config import InferenceSettings
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ZoomGrid
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.crop_dataset import DEVICE_BACKEND
from zoomeval.inference.predict import crop_stream

if TYPE_CHECKING:  # torchvision, imported by the standard evaluation only where a file of it is recomputed
    from zoomeval.inference.eval_transform import EvalTransform


def audit_settings(meta: dict[str, Any], device: str, precision: str, threads: int) -> InferenceSettings:
    """The settings that recompute a file's rows on ``device`` at ``precision``: its own crops (``device`` crops are
    PIL's bit for bit, so they are cut wherever they can be), memory format and class scoring; no compile, no
    workers, since a sample is a few images."""
    backend = meta.get("resize_backend") or "pil"
    return InferenceSettings(
        batch_size=32,
        device=device,
        num_workers=0,
        threads=threads,
        precision=precision,
        resize_backend="auto" if backend == DEVICE_BACKEND else backend,
        compile=False,
        channels_last=bool(meta.get("channels_last")),
    )


def zoom_logits(
    classifier: Classifier,
    rows: Sequence[tuple[Record, int, int, int]],
    variant: str,
    masks: dict[str, bytes] | None,
    crop_size: int,
) -> np.ndarray:
    """The full logits (``(len(rows), 1000)``, fp32) of each ``(record, scale, row, col)``: each image's crops at
    the scales its rows need, cut by the predict job's own stream, the chosen ones batched through the model."""
    by_image: dict[str, list[int]] = {}
    for k, (record, *_rest) in enumerate(rows):
        by_image.setdefault(record.image_id, []).append(k)
    crops: list[torch.Tensor | None] = [None] * len(rows)
    for members in by_image.values():
        record, grid = rows[members[0]][0], ZoomGrid(sorted({rows[k][1] for k in members}))
        _, views = next(iter(crop_stream(classifier, [record], grid, variant, masks, crop_size)))
        for k in members:
            crops[k] = views[grid.index(*rows[k][1:])].cpu()
    return _logits(classifier, [c for c in crops if c is not None])


def standard_logits(classifier: Classifier, transform: EvalTransform, records: Sequence[Record]) -> np.ndarray:
    """The full logits of each of ``records`` through the standard evaluation's model and transform
    (:func:`~zoomeval.inference.standard_eval.standard_classifier`), as its job computes them."""
    from zoomeval.inference.standard_eval import StandardImages

    images = StandardImages(records, transform.geometry)
    return _logits(classifier, [images[i][1] for i in range(len(records))])


def _logits(classifier: Classifier, images: Sequence[torch.Tensor]) -> np.ndarray:
    """The fp32 logits of uint8 HWC images of one size, in batches."""
    size = classifier.settings.batch_size
    out = []
    with torch.inference_mode():
        for start in range(0, len(images), size):
            out.append(classifier.logits(torch.stack(list(images[start : start + size]))).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 1000), np.float32)
