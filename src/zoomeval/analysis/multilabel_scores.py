"""One row of the multi-label table: Shankar et al.'s multi-label accuracy beside top-1 and top-5 accuracy on the same
images, ImageNet-M accuracy and the class slices, all at the 1-crop transform, and the zoom upper bounds under
multi-label labels (from the ``<dataset>_multilabel`` analysis)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import polars as pl

from zoomeval.analysis.metrics import Metrics
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP
from zoomeval.datasets.multilabel import Coverage, MultiLabels


@dataclass(frozen=True, kw_only=True)
class MultilabelScores:
    """Accuracies in percent; ``None`` where undefined (no top-5 stored, no ImageNet-M or slice image)."""

    model: str
    dataset: str
    coverage: Coverage
    #: annotated images that are not problematic: the images of every accuracy below but ImageNet-M's
    n_scored: int
    #: prediction = the image's original label; original label among the 5 highest logits; prediction judged correct
    acc_top1: float
    acc_top5: float | None
    acc_multilabel: float
    #: ImageNet-M images (problematic or not): prediction judged correct or unclear
    acc_imagenet_m: float | None
    #: multi-label accuracy per class slice (the image's original label in the slice): slice -> (images, accuracy)
    slices: dict[str, tuple[int, float | None]]
    #: the multi-label upper bounds: union of the first top_k greedy picks, union of every transform (of
    #: n_transforms, 9 per scale)
    top_k: int
    n_transforms: int
    acc_multilabel_top_k: float
    acc_multilabel_max: float
    #: what the multilabel analysis left out (bad images, images not annotated or problematic)
    left_out: LeftOut | None = None


def one_crop_predictions(path: str | os.PathLike[str]) -> pl.DataFrame:
    """``image_id``, ``pred`` and, when the file has it, ``top5`` of the 1-crop transform's rows."""
    scale, row, col = ONE_CROP
    columns = ["image_id", "pred", *(["top5"] if "top5" in pl.read_parquet_schema(path) else [])]
    return (
        pl.scan_parquet(path)
        .filter((pl.col("scale") == scale) & (pl.col("row") == row) & (pl.col("col") == col))
        .select(columns)
        .with_columns(pl.col("image_id").cast(pl.String))
        .collect()
    )


def _percent(hits: list[bool]) -> float | None:
    return 100 * sum(hits) / len(hits) if hits else None


def _check_agrees(multilabel: Metrics, acc_multilabel: float | None, n_scored: int) -> None:
    """Refuse a ``multilabel`` analysis whose 1-crop accuracy or image count is not the one recomputed here."""
    if (
        acc_multilabel is None
        or n_scored != multilabel.n_images
        or multilabel.acc_1crop is None
        or abs(acc_multilabel - multilabel.acc_1crop) > 1e-9
    ):
        raise ValueError(
            f"{multilabel.model} on {multilabel.dataset}: multi-label 1-crop accuracy {acc_multilabel} over "
            f"{n_scored} images here, {multilabel.acc_1crop} over {multilabel.n_images} in its analysis; the "
            "analysis is stale: re-run it (snakemake --forcerun analyze)"
        )


def score(
    dataset: str,
    one_crop: pl.DataFrame,
    records: list[Record],
    labels: dict[str, MultiLabels],
    coverage: Coverage,
    groups: dict[str, frozenset[int]],
    multilabel: Metrics,
) -> MultilabelScores:
    """The row of one (model, dataset) from its 1-crop predictions, the manifest's records (original labels), the
    dataset's annotations, the class slices and the metrics of its ``multilabel`` analysis (which must agree with
    the 1-crop predictions: the same images, the same accuracy)."""
    by_id = {row["image_id"]: row for row in one_crop.iter_rows(named=True)}
    if len(by_id) != one_crop.height or set(by_id) != {r.image_id for r in records}:
        raise ValueError(
            f"{multilabel.model} on {multilabel.dataset}: the 1-crop predictions do not cover the "
            "manifest's images once each; re-run predict"
        )
    scored = [r for r in records if r.image_id in labels and not labels[r.image_id].problematic]
    top5 = "top5" in one_crop.columns
    multi = [by_id[r.image_id]["pred"] in labels[r.image_id].correct for r in scored]
    acc_multilabel = _percent(multi)
    _check_agrees(multilabel, acc_multilabel, len(scored))
    in_m = [r for r in records if r.image_id in labels and labels[r.image_id].imagenet_m]
    return MultilabelScores(
        model=multilabel.model,
        dataset=dataset,
        coverage=coverage,
        n_scored=len(scored),
        acc_top1=_percent([by_id[r.image_id]["pred"] in r.labels for r in scored]),
        acc_top5=_percent([bool(set(by_id[r.image_id]["top5"]) & set(r.labels)) for r in scored]) if top5 else None,
        acc_multilabel=acc_multilabel,
        acc_imagenet_m=_percent(
            [by_id[r.image_id]["pred"] in {*labels[r.image_id].correct, *labels[r.image_id].unclear} for r in in_m]
        ),
        slices={
            name: (len(hits), _percent(hits))
            for name, classes in groups.items()
            for hits in [[hit for r, hit in zip(scored, multi, strict=True) if set(r.labels) <= classes]]
        },
        top_k=multilabel.top_k,
        n_transforms=multilabel.n_transforms,
        acc_multilabel_top_k=multilabel.acc_top_k,
        acc_multilabel_max=multilabel.acc_max,
        left_out=multilabel.left_out,
    )
