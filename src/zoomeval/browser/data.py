"""The per-image browser's data for one scored dataset: a compact index for filtering and sorting every image of
the sample, and the details of each image in page shards that the page loads only when it shows them.

Both are JavaScript files that call a function of the page with one JSON document (``zoomBrowser.index(...)``,
``zoomBrowser.page(...)``): a page opened from ``file://`` may load scripts but not fetch JSON files.

Index (``data/<scored>/index.js``): the models, variants, scales (as listed; the transforms are ordered anchors
row-major, then scales), each model's first ``predictions_shown`` greedy picks, origins, and per model and
variant one integer per image, ``4 * n + in_only + 2 * out_only``: ``n`` transforms solve the image, all of them
with S > 224 (``in_only``) or all with S < 224 (``out_only``).

Page shards (``data/<scored>/pages/<k>.js``, ``shard_images`` images each, in manifest order): per image its id,
manifest position ``i`` (thumbnail and crop file names), size, boxes, labels, and per model the first transform
of the greedy order that solves it on the original images, the predictions of the 1-crop and the first
``predictions_shown`` greedy picks, and per variant the correctness bits (``np.packbits`` of the matrix column in
transform order, base64).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from zoomeval.analysis.label_sets import left_out_of, relabel
from zoomeval.analysis.matrix import read_matrix
from zoomeval.analysis.metrics import read_greedy
from zoomeval.core.io import write_text
from zoomeval.core.layout import declare, relative_to, run_layout
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import ONE_CROP, Transform, ZoomGrid
from zoomeval.report.left_out import why

#: Version of the index and page documents. 2: the index says what the dataset's scoring left out (``left_out``).
BROWSER_SCHEMA_VERSION = 2
declare("browser_catalogue", schema_version=BROWSER_SCHEMA_VERSION)
declare("browser_data", schema_version=BROWSER_SCHEMA_VERSION)
#: Images per page shard: a page of the browser loads the shards its images fall in.
SHARD_IMAGES = 100


def sample_indices(n: int, max_images: int) -> np.ndarray:
    """Manifest positions of the images the browser shows: all ``n`` if ``max_images >= n``, else ``max_images``
    of them spread evenly over the manifest order (position ``k * n // max_images`` for k = 0, 1, ...)."""
    if max_images >= n:
        return np.arange(n)
    return np.arange(max_images) * n // max_images


def thumbnail_name(index: int) -> str:
    """File name of the thumbnail of the image at manifest position ``index``."""
    return f"{index:06d}.jpg"


def crop_name(index: int, model: str) -> str:
    """File name of the crop that ``model`` first solves the image at manifest position ``index`` with."""
    return f"{index:06d}_{model}.jpg"


@dataclass(frozen=True)
class ScoredMatrices:
    """The correctness matrices of one scored dataset, one per (model, variant), over the same images and
    transforms (``matrices[model, variant]`` is ``(len(order), len(image_ids))``)."""

    models: list[str]
    variants: list[str]
    order: list[Transform]
    image_ids: list[str]
    matrices: dict[tuple[str, str], np.ndarray]

    @property
    def scales(self) -> list[int]:
        return list(dict.fromkeys(t.scale for t in self.order))


def read_scored_matrices(paths: Mapping[tuple[str, str], str | os.PathLike[str]]) -> ScoredMatrices:
    """Read the ``correct.npz`` of each (model, variant); refuse files whose images or transforms differ."""
    matrices: dict[tuple[str, str], np.ndarray] = {}
    first: tuple[str, list[Transform], list[str]] | None = None
    for key, path in paths.items():
        matrix, order, ids = read_matrix(path)
        if first is None:
            first = (str(path), order, ids)
            if tuple(order) != ZoomGrid(dict.fromkeys(t.scale for t in order)).transforms:
                raise ValueError(f"{path}: the transforms are not in the authors' order; re-run the analysis")
        elif (order, ids) != first[1:]:
            raise ValueError(
                f"{path} and {first[0]} hold different images or transforms; re-run the analysis "
                "(snakemake --forcerun analyze)"
            )
        matrices[key] = matrix
    if first is None:
        raise ValueError("no correctness matrices given")
    models = list(dict.fromkeys(m for m, _ in paths))
    variants = list(dict.fromkeys(v for _, v in paths))
    return ScoredMatrices(models, variants, first[1], first[2], matrices)


def first_solving(matrix: np.ndarray, greedy: Sequence[int]) -> np.ndarray:
    """Per image (column), the first greedy pick (a row of ``matrix``) that solves it; -1 where none does.

    The greedy cover covers every image that some transform solves, so a solved image without a pick means the
    cover does not belong to the matrix, and is refused."""
    first = np.full(matrix.shape[1], -1, dtype=np.int64)
    for row in greedy:
        first[matrix[row] & (first < 0)] = row
    if (matrix.any(axis=0) & (first < 0)).any():
        raise ValueError("the greedy cover leaves solved images uncovered: cover.json does not belong to correct.npz")
    return first


def greedy_rows(cover_path: str | os.PathLike[str], order: list[Transform]) -> list[int]:
    """The greedy picks of a cover.json as rows of the matrix whose transform order is ``order``."""
    row_of = {t: r for r, t in enumerate(order)}
    return [row_of[t] for t in read_greedy(cover_path)]


def image_codes(matrix: np.ndarray, order: list[Transform]) -> np.ndarray:
    """Per image, ``4 * n + in_only + 2 * out_only`` (see the module docstring)."""
    scales = np.array([t.scale for t in order])
    n = matrix.sum(axis=0)
    zoom_in = matrix[scales > 224].sum(axis=0)
    zoom_out = matrix[scales < 224].sum(axis=0)
    return 4 * n + ((n > 0) & (zoom_in == n)) + 2 * ((n > 0) & (zoom_out == n))


def shown_rows(order: list[Transform], greedy: list[int], predictions_shown: int) -> list[int]:
    """The transforms whose predictions an image card lists: the 1-crop (where it is among the transforms),
    then the first ``predictions_shown`` greedy picks."""
    one = Transform(*ONE_CROP)
    head = [order.index(one)] if one in order else []
    return list(dict.fromkeys(head + greedy[:predictions_shown]))


def read_predictions(
    path: str | os.PathLike[str], image_ids: list[str], rows: list[int], order: list[Transform]
) -> np.ndarray:
    """``pred`` of each image in ``image_ids`` (rows of the result) under each transform ``order[r]`` for r in
    ``rows`` (columns), from a prediction file; refuses a file that lacks any of them."""
    wanted = pl.DataFrame(
        {
            "scale": [order[r].scale for r in rows],
            "row": [order[r].row for r in rows],
            "col": [order[r].col for r in rows],
            "j": np.arange(len(rows)),
        },
        schema_overrides={"scale": pl.Int16, "row": pl.Int8, "col": pl.Int8},
    )
    ids = pl.DataFrame({"image_id": image_ids, "k": np.arange(len(image_ids))})
    found = (
        pl.scan_parquet(path)
        .select("image_id", "scale", "row", "col", "pred")
        .with_columns(pl.col("image_id").cast(pl.String))
        .join(wanted.lazy(), on=["scale", "row", "col"])
        .join(ids.lazy(), on="image_id")
        .unique(["k", "j"])
        .collect()
    )
    if found.height != len(image_ids) * len(rows):
        raise ValueError(
            f"{path} lacks predictions for {len(image_ids) * len(rows) - found.height} of the "
            f"(image, transform) pairs the browser shows; re-run predict"
        )
    preds = np.zeros((len(image_ids), len(rows)), dtype=np.int64)
    preds[found["k"].to_numpy(), found["j"].to_numpy()] = found["pred"].to_numpy()
    return preds


def script(call: str, *args: Any) -> str:
    """A data file: a call of the page's ``zoomBrowser.<call>`` with JSON arguments."""
    return f"zoomBrowser.{call}({','.join(json.dumps(a, separators=(',', ':')) for a in args)});\n"


@dataclass(frozen=True)
class Shown:
    """The images the browser shows of one scored dataset: their manifest positions, their columns in the
    correctness matrices and their records with the label set's labels."""

    positions: list[int]
    columns: np.ndarray
    records: list[Record]


def shown_images(
    scored: str,
    records: list[Record],
    label_set: str,
    c: ScoredMatrices,
    max_images: int,
    labels_path: str | None = None,
) -> Shown:
    """The manifest's sample (:func:`sample_indices`) that the label set scores (ReaL and Shankar et al.'s labels
    leave some out; ``labels_path``: the label set's labels file if it has one)."""
    scored_records = relabel(records, label_set, labels_path)
    if [r.image_id for r in scored_records] != c.image_ids:
        raise ValueError(f"{scored}: the correctness matrices do not belong to the manifest; re-run the analysis")
    column = {image_id: j for j, image_id in enumerate(c.image_ids)}
    positions = [int(i) for i in sample_indices(len(records), max_images) if records[i].image_id in column]
    columns = np.array([column[records[i].image_id] for i in positions], dtype=np.int64)
    return Shown(positions, columns, [scored_records[j] for j in columns])


Paths = Mapping[str, str | os.PathLike[str]]


def model_details(
    c: ScoredMatrices, shown: Shown, covers: Paths, predictions: Paths, predictions_shown: int
) -> list[dict]:
    """Per model: its first greedy picks, and per image shown the first solving pick and the listed predictions."""
    ids = [r.image_id for r in shown.records]
    details = []
    for m in c.models:
        greedy = greedy_rows(covers[m], c.order)
        rows = shown_rows(c.order, greedy, predictions_shown)
        preds = read_predictions(predictions[m], ids, rows, c.order).tolist()
        first = first_solving(c.matrices[m, "original"][:, shown.columns], greedy).tolist()
        details.append(
            {
                "greedy": greedy[:predictions_shown],
                "first": first,
                "preds": [[list(pair) for pair in zip(rows, p, strict=True)] for p in preds],
            }
        )
    return details


def index_document(c: ScoredMatrices, shown: Shown, models: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """The index of one scored dataset; ``fields``: name, dataset, label_set, page_size, shard_images, left_out."""
    one = Transform(*ONE_CROP)
    origins = sorted({r.origin for r in shown.records})
    return {
        "schema_version": BROWSER_SCHEMA_VERSION,
        **fields,
        "models": c.models,
        "variants": c.variants,
        "scales": c.scales,
        "one_crop": c.order.index(one) if one in c.order else None,
        "greedy": [d["greedy"] for d in models],
        "n_scored": len(c.image_ids),
        "n_images": len(shown.records),
        "thumbnails": relative_to("browser_thumbnails", "browser", dataset=fields["dataset"]) + "/",
        "crops": relative_to("browser_crops", "browser", scored=fields["name"]) + "/",
        "origins": origins,
        "origin": [origins.index(r.origin) for r in shown.records],
        "codes": [
            [image_codes(c.matrices[m, v][:, shown.columns], c.order).tolist() for v in c.variants] for m in c.models
        ],
    }


def page_cards(c: ScoredMatrices, shown: Shown, models: list[dict[str, Any]], ks: range) -> list[dict[str, Any]]:
    """The details of the images shown at positions ``ks`` of the sample (one page shard)."""
    columns = shown.columns[ks.start : ks.stop]
    bits = {key: np.packbits(matrix[:, columns].T, axis=1) for key, matrix in c.matrices.items()}
    cards = []
    for j, k in enumerate(ks):
        r = shown.records[k]
        cards.append(
            {
                "id": r.image_id,
                "i": shown.positions[k],
                "size": [r.width, r.height],
                "boxes": [list(b) for b in r.boxes],
                "labels": list(r.labels),
                "models": [{"first": d["first"][k], "preds": d["preds"][k]} for d in models],
                "heat": [[base64.b64encode(bits[m, v][j].tobytes()).decode() for v in c.variants] for m in c.models],
            }
        )
    return cards


def write_browser_data(
    out_dir: str | os.PathLike[str],
    *,
    scored: str,
    dataset: str,
    label_set: str,
    records: list[Record],
    correctness: ScoredMatrices,
    covers: Paths,
    predictions: Paths,
    max_images: int,
    page_size: int,
    predictions_shown: int,
    shard_images: int = SHARD_IMAGES,
    labels_path: str | None = None,
    bad: Mapping[str, int] | None = None,
    limit: int | None = None,
) -> int:
    """Write ``index.js`` and the page shards of one scored dataset to ``out_dir``; returns the images shown.

    ``records`` is the dataset's manifest, ``correctness`` the matrices of every (model, variant) under
    ``label_set``, ``covers`` and ``predictions`` the cover.json and prediction file of each model on the original
    images (``labels_path``: the label set's labels file if it has one; ``bad``: the manifest's bad images by
    kind; ``limit``: the run's, whose bad images' file the page names). The images shown are the manifest's
    sample that the label set scores, with the labels it scores them by.
    """
    c = correctness
    shown = shown_images(scored, records, label_set, c, max_images, labels_path)
    models = model_details(c, shown, covers, predictions, predictions_shown)
    left = left_out_of(dataset, bad or {}, records, c.image_ids, label_set)
    why_left = why(left, run_layout(limit))
    index = index_document(
        c,
        shown,
        models,
        name=scored,
        dataset=dataset,
        label_set=label_set,
        page_size=page_size,
        shard_images=shard_images,
        left_out={"n_bad": left.n_bad, "n_unscored": left.n_unscored, "why": why_left},
    )
    out = Path(out_dir)
    write_text(out / "index.js", script("index", index))
    for shard, start in enumerate(range(0, len(shown.records), shard_images)):
        page = page_cards(c, shown, models, range(start, min(start + shard_images, len(shown.records))))
        write_text(out / "pages" / f"{shard:05d}.js", script("page", scored, shard, page))
    return len(shown.records)
