"""Foreground masks from Segment Anything (SAM).

Two methods, both writing the mask file layout of :func:`zoomeval.masks.write_box_masks`:

* ``sam_box``: every ground-truth box of an image prompts SAM (one batched decoder call on one image
  encoding); per box the best of SAM's three candidate masks (highest predicted IoU) is kept, and the
  image's mask is their union. ``n_objects`` is the number of boxes.
* ``sam_auto``: SAM's automatic mask generator proposes masks from a point grid; :func:`count_objects`
  filters them into objects, ``n_objects`` is their number and the mask is their union.

Checkpoints are read with ``torch.load(..., weights_only=True)``; segment-anything's own builder is never
given a checkpoint path because it unpickles with the unsafe default.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from segment_anything import SamAutomaticMaskGenerator, SamPredictor, sam_model_registry
from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

from zoomeval import __version__
from zoomeval.core.checksums import sha256_file
from zoomeval.core.config import CountFilter
from zoomeval.core.images import load_rgb
from zoomeval.core.io import write_parquet
from zoomeval.core.manifest import Record
from zoomeval.masks import SAM_METHODS
from zoomeval.masks.boxes import MASKS_SCHEMA_VERSION, box_mask, encode_mask

log = logging.getLogger(__name__)

#: Seconds between progress lines in the job's log.
PROGRESS_SECONDS = 30.0

#: ``(image, boxes) -> (mask, per-object scores)``
Segmenter = Callable[[np.ndarray, Sequence[Sequence[int]]], tuple[np.ndarray, list[float]]]


#: segment_anything's architectures with official checkpoints, and the toy one of :func:`build_tiny_sam`.
MODEL_TYPES = ("vit_b", "vit_l", "vit_h", "tiny")


def build_tiny_sam() -> Sam:
    """SAM's architecture at toy size (model type ``tiny``): one global-attention ViT block on 64-px inputs,
    32-d prompts. It has no published weights: it lets tests and smoke runs exercise the real predictor
    and generator code on a CPU in seconds, with a random-init checkpoint."""
    size, patch, dim = 64, 16, 32
    return Sam(
        image_encoder=ImageEncoderViT(
            img_size=size, patch_size=patch, embed_dim=32, depth=1, num_heads=2, mlp_ratio=2, out_chans=dim
        ),
        prompt_encoder=PromptEncoder(
            embed_dim=dim,
            image_embedding_size=(size // patch, size // patch),
            input_image_size=(size, size),
            mask_in_chans=4,
        ),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=3,
            transformer=TwoWayTransformer(depth=1, embedding_dim=dim, mlp_dim=64, num_heads=2),
            transformer_dim=dim,
            iou_head_depth=2,
            iou_head_hidden_dim=32,
        ),
        pixel_mean=[123.675, 116.28, 103.53],
        pixel_std=[58.395, 57.12, 57.375],
    )


def load_sam(
    model_type: str,
    checkpoint: str | os.PathLike[str],
    device: str | torch.device = "cpu",
    build: Callable[[], Sam] | None = None,
) -> Sam:
    """SAM ``model_type`` with the weights of ``checkpoint``, in eval mode on ``device``.

    ``build`` makes the (randomly initialised) network instead of segment-anything's registry, for
    architectures outside it; the weights are loaded the same way either way.
    """
    if build is None and model_type == "tiny":
        build = build_tiny_sam
    if build is None:
        if model_type not in sam_model_registry:
            raise ValueError(f"unknown SAM model type {model_type!r}; expected one of {list(MODEL_TYPES)}")
        sam = sam_model_registry[model_type](checkpoint=None)
    else:
        sam = build()
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    sam.load_state_dict(state, strict=True)
    return sam.to(device).eval()


def box_masks_sam(
    predictor: SamPredictor, image: np.ndarray, boxes: Sequence[Sequence[int]]
) -> tuple[np.ndarray, list[float]]:
    """The union of SAM's masks for ``boxes`` on an ``H x W x 3`` uint8 RGB image, and each box's score.

    A box's mask is the one of SAM's three candidates with the highest predicted IoU, its score.
    """
    height, width = image.shape[:2]
    if not boxes:
        return np.zeros((height, width), dtype=bool), []
    predictor.set_image(image)
    # Half-open pixel boxes are SAM's continuous XYXY boxes: the edges xmin and xmax bound the object.
    prompts = torch.as_tensor(np.asarray(boxes, dtype=np.float32), device=predictor.device)
    masks, ious, _ = predictor.predict_torch(
        None, None, boxes=predictor.transform.apply_boxes_torch(prompts, (height, width)), multimask_output=True
    )
    best = ious.argmax(dim=1)  # the first of equal scores, so ties resolve deterministically
    rows = torch.arange(len(best), device=best.device)
    union = masks[rows, best].any(dim=0).cpu().numpy()
    return union, ious[rows, best].float().cpu().tolist()


def auto_masks(generator: SamAutomaticMaskGenerator, image: np.ndarray) -> list[dict[str, Any]]:
    """SAM's automatic masks of an ``H x W x 3`` uint8 RGB image, each with a boolean ``segmentation``."""
    if generator.output_mode != "binary_mask":
        raise ValueError(f"counting needs binary masks, not output_mode {generator.output_mode!r}")
    return generator.generate(image)


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boolean masks (0 for two empty masks)."""
    union = np.count_nonzero(a | b)
    return np.count_nonzero(a & b) / union if union else 0.0


def count_objects(
    masks: Sequence[dict[str, Any]],
    min_iou: float,
    min_stability: float,
    min_area_fraction: float,
    max_overlap: float,
) -> list[dict[str, Any]]:
    """The automatic masks that count as objects, best first; the object count is their number.

    A mask is a candidate if its ``predicted_iou`` is at least ``min_iou``, its ``stability_score`` at
    least ``min_stability`` and it covers at least ``min_area_fraction`` of the image (and one pixel).
    Candidates are visited by descending ``predicted_iou`` (ties in input order); one whose mask IoU with
    an already kept mask exceeds ``max_overlap`` is a duplicate and dropped.
    """

    def is_candidate(m: dict[str, Any]) -> bool:
        seg = m["segmentation"]
        area = np.count_nonzero(seg)
        quality = m["predicted_iou"] >= min_iou and m["stability_score"] >= min_stability
        return quality and area > 0 and area / seg.size >= min_area_fraction

    kept: list[dict[str, Any]] = []
    for m in sorted(filter(is_candidate, masks), key=lambda m: -m["predicted_iou"]):
        if all(mask_iou(m["segmentation"], k["segmentation"]) <= max_overlap for k in kept):
            kept.append(m)
    return kept


def auto_foreground(
    generator: SamAutomaticMaskGenerator, image: np.ndarray, counting: CountFilter
) -> tuple[np.ndarray, list[float]]:
    """The union of the counted automatic masks of ``image``, and each counted object's predicted IoU."""
    kept = count_objects(auto_masks(generator, image), **asdict(counting))
    union = np.zeros(image.shape[:2], dtype=bool)
    for k in kept:
        union |= k["segmentation"]
    return union, [k["predicted_iou"] for k in kept]


def box_coverage(mask: np.ndarray, boxes: Sequence[Sequence[int]]) -> float | None:
    """The fraction of the boxes' union that ``mask`` covers (``None`` without box pixels)."""
    height, width = mask.shape
    inside = box_mask(width, height, boxes)
    total = np.count_nonzero(inside)
    return np.count_nonzero(mask & inside) / total if total else None


def _segmenter(method: str, sam: Sam, counting: CountFilter, options: dict[str, Any]) -> Segmenter:
    if method == "sam_box":
        predictor = SamPredictor(sam)
        return lambda image, boxes: box_masks_sam(predictor, image, boxes)
    generator = SamAutomaticMaskGenerator(sam, **options)
    return lambda image, _: auto_foreground(generator, image, counting)


def write_sam_masks(
    path: str | os.PathLike[str],
    records: Sequence[Record],
    *,
    dataset: str,
    method: str,
    model_type: str,
    checkpoint: str | os.PathLike[str],
    device: str | torch.device = "cpu",
    counting: CountFilter | None = None,
    generator_options: Mapping[str, Any] | None = None,
    build: Callable[[], Sam] | None = None,
) -> None:
    """One row per image with its SAM mask, like :func:`zoomeval.masks.write_box_masks`, plus ``scores``
    (per object: SAM's predicted IoU) and ``box_coverage`` (null for images without boxes).

    ``counting`` (default: the config's defaults) filters the automatic masks and ``generator_options`` are
    keyword arguments of ``SamAutomaticMaskGenerator`` (both ``sam_auto`` only); ``build`` is passed to
    :func:`load_sam`.
    """
    if method not in SAM_METHODS:
        raise ValueError(f"unknown SAM mask method {method!r}; expected one of {SAM_METHODS}")
    options, counting = dict(generator_options or {}), counting or CountFilter()
    segment = _segmenter(method, load_sam(model_type, checkpoint, device, build), counting, options)
    table = _mask_table(records, method, segment)
    meta: dict[str, Any] = {
        "kind": "masks",
        "schema_version": MASKS_SCHEMA_VERSION,
        "dataset": dataset,
        "method": method,
        "model_type": model_type,
        "checkpoint_sha256": sha256_file(checkpoint),
        "zoomeval": __version__,
    }
    if method == "sam_auto":  # the counting rule only shapes sam_auto masks
        meta |= {"counting": asdict(counting), "generator_options": options}
    write_parquet(path, table, meta)


def _mask_table(records: Sequence[Record], method: str, segment: Segmenter) -> pa.Table:
    """Each record's mask, area, object scores and box coverage."""
    # Masks are encoded as they come: a dataset's full-size boolean masks would not fit in memory.
    pngs: list[bytes] = []
    areas: list[float] = []
    scores: list[list[float]] = []
    coverage: list[float | None] = []
    last = time.monotonic()
    for i, record in enumerate(records):
        mask, object_scores = segment(np.asarray(load_rgb(record)), record.boxes)
        pngs.append(encode_mask(mask))
        areas.append(float(mask.mean()))
        scores.append(object_scores)
        coverage.append(box_coverage(mask, record.boxes))
        if time.monotonic() - last > PROGRESS_SECONDS:
            log.info("%s: %d / %d images", method, i + 1, len(records))
            last = time.monotonic()
    return pa.table(
        {
            "image_id": [r.image_id for r in records],
            "method": [method] * len(records),
            "mask_png": pngs,
            "area_fraction": pa.array(areas, pa.float32()),
            "n_objects": pa.array([len(s) for s in scores], pa.int16()),
            "scores": pa.array(scores, pa.list_(pa.float32())),
            "box_coverage": pa.array(coverage, pa.float32()),
        }
    )
