"""The standard evaluation: each model on each image once, through the model's own evaluation transform.

This is what model cards and the ImageNet-Hard dataset card report, next to the zoom grid's 1-crop transform
(``LOC:1_1_Size:256``), which resizes with bicubic at S = 256 and crops at the integer centre anchor for every model:

* torchvision: the weights' ``transforms()`` preset (e.g. Resize(256, bilinear) + CenterCrop(224) for ResNet-50
  V1, Resize(600, bicubic) + CenterCrop(600) for EfficientNet-B7); checkpoint: the preset its ``eval_preset`` names
  (default ``IMAGENET1K_V1``);
* timm: the pretrained config through ``timm.data.resolve_data_config`` / ``create_transform`` (EfficientNet-L2-NS:
  Resize(833, bicubic) + CenterCrop(800)); a local timm file: its architecture's default config, or its
  ``eval_preset``'s; embedded: that of ``tf_efficientnet_lite0.in1k``, Resize(256, bicubic) + CenterCrop(224);
* open_clip: the model's own preprocess (``image_transform_v2`` of its preprocess config; CLIP: Resize(224 or
  336, bicubic) + CenterCrop);
* entry_point: the transform the entry point returns with its module.

The metadata records the transform and, for timm's results CSVs, its img_size, crop_pct and interpolation
(``geometry``).

Each model source declares its transform (``evaluation``, :mod:`zoomeval.inference.eval_transform`).

The transform's geometric steps run on the decoded PIL image in DataLoader workers; its normalisation (always the
weights' own mean/std, whatever the config sets for the zoom grid) runs on the device, as in the zoom grid.
Predictions are scored over the dataset's class set exactly as in :mod:`zoomeval.inference.predict`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from zoomeval import __version__
from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.devices import use_threads
from zoomeval.core.images import load_rgb
from zoomeval.core.io import write_parquet
from zoomeval.core.layout import declare
from zoomeval.core.manifest import Record
from zoomeval.core.progress import ProgressLog
from zoomeval.core.provenance import source
from zoomeval.inference.classifier import Classifier
from zoomeval.inference.eval_transform import EvalTransform
from zoomeval.inference.models import MODEL_SOURCES, LoadedModel
from zoomeval.inference.predict import model_metadata
from zoomeval.inference.tables import BASE_FIELDS, TOP5_FIELDS, top5_columns

log = logging.getLogger(__name__)

#: Version of the standard-evaluation Parquet layout.
SCHEMA_VERSION = 1
FIELDS = [pa.field("image_id", pa.string()), *(f for f in BASE_FIELDS if f.name in ("pred", "pred_full", "conf"))]
declare("standard", FIELDS + TOP5_FIELDS, SCHEMA_VERSION)


def eval_transform(spec: ModelSpec, module: torch.nn.Module | None) -> EvalTransform:
    """``spec``'s evaluation transform; ``module`` is the loaded classifier (timm and open_clip read theirs off it)."""
    evaluation = MODEL_SOURCES.get(spec.source).evaluation
    if evaluation is None:
        raise ValueError(f"model {spec.name!r}: source {spec.source!r} has no evaluation transform")
    return evaluation(spec, module)


class StandardImages(Dataset[tuple[int, torch.Tensor]]):
    """Image ``i`` of a manifest after the transform's geometric steps, ``(height, width, 3)`` uint8."""

    def __init__(self, records: Sequence[Record], geometry: Callable[[Image.Image], Image.Image]) -> None:
        self.records, self.geometry = records, geometry

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        image = self.geometry(load_rgb(self.records[i]))
        return i, torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.uint8).copy())


def standard_classifier(
    spec: ModelSpec,
    settings: InferenceSettings,
    class_indices: Sequence[int] | None,
    weights: Path | None,
    head: Path | None,
    loaded: LoadedModel | None = None,
) -> tuple[Classifier, EvalTransform]:
    """The model with the weights' own normalisation (the config's mean/std are the zoom grid's) and its transform,
    whose normalisation must be the weights'; ``loaded``: the model already loaded so (an audit's, reused)."""
    own_spec = replace(spec, mean=None, std=None)
    classifier = Classifier(own_spec, settings, class_indices, weights, loaded=loaded, head=head)
    transform = eval_transform(spec, getattr(classifier.model, "_orig_mod", classifier.model))  # torch.compile wraps
    own = (tuple(classifier.normalisation["mean"]), tuple(classifier.normalisation["std"]))
    if not np.allclose(own, (transform.mean, transform.std)):
        raise ValueError(
            f"model {spec.name!r}: its evaluation transform normalises with {transform.mean}/"
            f"{transform.std}, its weights with {own[0]}/{own[1]}"
        )
    log.info("evaluation transform of %s: %s", spec.name, transform.description)
    return classifier, transform


def _image(record: Record) -> str:
    return f"image {record.image_id} ({record.path})"


def _predict(classifier: Classifier, loader: DataLoader, records: Sequence[Record]) -> dict[str, np.ndarray]:
    parts: list[dict[str, np.ndarray]] = []
    progress = ProgressLog(len(records), 1, log)  # read by `zoomeval run`
    progress.line()  # the total, at once
    with torch.inference_mode():
        for indices, images in loader:
            progress.advance(len(indices))
            logits = classifier.logits(images)
            finite = classifier.finite(logits).cpu().numpy()
            classifier.check_finite(finite, lambda k, ids=indices: _image(records[int(ids[k])]))
            parts.append(classifier.columns(logits))
    progress.line()
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def evaluate_to_file(
    path: str | os.PathLike[str],
    records: Sequence[Record],
    spec: ModelSpec,
    settings: InferenceSettings,
    dataset: str,
    class_indices: Sequence[int] | None = None,
    weights: Path | None = None,
    head: Path | None = None,
) -> dict[str, Any]:
    """Predict every image of ``records`` once through ``spec``'s evaluation transform into the Parquet file
    ``path`` (a row per image, manifest order); returns its metadata. ``weights``: the folder of the fetched
    weights; ``head``: the zero-shot head of an open_clip model."""
    if not records:
        raise ValueError(f"dataset {dataset!r}: the manifest lists no images, so there is nothing to evaluate")
    use_threads(settings.threads)
    classifier, transform = standard_classifier(spec, settings, class_indices, weights, head)
    loader = DataLoader(
        StandardImages(records, transform.geometry),
        batch_size=settings.batch_size,
        num_workers=settings.num_workers,
        pin_memory=classifier.device.type == "cuda",
    )
    start = time.perf_counter()
    columns = _predict(classifier, loader, records)
    seconds = time.perf_counter() - start
    data = {"image_id": [r.image_id for r in records], **{k: columns[k] for k in ("pred", "pred_full", "conf")}}
    table = pa.table(
        {**data, **top5_columns(columns)}, schema=pa.schema(FIELDS + (TOP5_FIELDS if "top5" in columns else []))
    )
    metadata = {
        "kind": "standard_predictions",
        "schema_version": SCHEMA_VERSION,
        "zoomeval": __version__,
        **source(),
        "torch": torch.__version__,
        "model": model_metadata(classifier, spec),
        "transform": transform.description,
        "geometry": transform.crop_settings(),
        "dataset": dataset,
        "precision": settings.precision,
        "class_set": "full" if class_indices is None else "subset",
        "class_indices": None if class_indices is None else list(class_indices),
        "n_images": len(records),
        "device": classifier.device.type,
        "seconds": round(seconds, 3),
    }
    write_parquet(path, table, metadata)
    log.info("%d images in %.1f s", len(records), seconds)
    return metadata
