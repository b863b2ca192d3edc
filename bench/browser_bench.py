"""Build time and size of the image browser for a synthetic 50,000-image analysis.

Run ``python bench/browser_bench.py``; prints the figures and writes ``results/bench/browser.json``.

It fabricates, in a temporary folder, what the workflow has cached for one dataset of 50,000 images with three
models and three variants: the manifest (one or two boxes per image), the correctness matrices (324 transforms, the
zoom-structured model of ``bench/cover_bench.py``), each model's greedy cover on the original images and its
prediction file (50,000 x 324 rows with the workflow's columns; the prediction is the label where the matrix says
correct). It then times the index and page shards over all 50,000 images, and the thumbnails and crops over a sample
of images (real 500 x 375 JPEGs; only the sample's files exist), from which it extrapolates to 50,000. Where
Debian's chromium is installed, it opens the page headless and times the first page and a filter over all images.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from cover_bench import N_IMAGES, SEED, zoom_matrix
from PIL import Image, ImageDraw

from zoomeval.analysis.cover import greedy_cover
from zoomeval.analysis.matrix import write_matrix
from zoomeval.browser.data import read_scored_matrices, write_browser_data
from zoomeval.browser.images import write_crops, write_thumbnails
from zoomeval.browser.site import write_site
from zoomeval.core.io import write_json, write_parquet
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import paper_scales, transforms

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.chromium import CHROMIUM, Chromium  # noqa: E402 (the tests' DevTools driver)

MODELS = ["model_a", "model_b", "model_c"]
VARIANTS = ["original", "fgset", "bgset"]
SAMPLE = 300  # images whose thumbnails and crops are made and timed
THUMBNAIL_SIZE, CROP_SIZE = 160, 224
OUT = Path("results/bench/browser.json")


def folder_size(path: Path) -> tuple[int, int]:
    """Bytes and number of the files under ``path``."""
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def fabricate(root: Path, rng: np.random.Generator) -> tuple[list[Record], dict, dict, dict]:
    order = transforms(paper_scales())
    labels = rng.integers(0, 1000, N_IMAGES)
    sample = set((np.arange(SAMPLE) * N_IMAGES // SAMPLE).tolist())  # sample_indices(N_IMAGES, SAMPLE)
    records = []
    for k in range(N_IMAGES):
        path = root / "images" / f"{k:08d}.jpg"
        if k in sample:
            path.parent.mkdir(exist_ok=True)
            pixels = rng.integers(0, 256, (375 // 25, 500 // 25, 3), dtype=np.uint8)
            image = Image.fromarray(pixels).resize((500, 375), Image.Resampling.BICUBIC)
            ImageDraw.Draw(image).ellipse((150, 100, 350, 300), fill=(200, 120, 40))
            image.save(path, quality=90)
        boxes = [(150, 100, 350, 300)] + ([(20, 30, 120, 140)] if k % 3 == 0 else [])
        records.append(
            Record(f"ILSVRC2012_val_{k + 1:08d}", str(path), [int(labels[k])], [], 500, 375, boxes, "imagenet")
        )
    matrices, covers, predictions = {}, {}, {}
    for m in MODELS:
        for v in VARIANTS:
            matrix = zoom_matrix(rng)
            matrices[m, v] = root / v / m / "correct.npz"
            write_matrix(matrices[m, v], matrix, order, records, CROP_SIZE)
            if v != "original":
                continue
            greedy = [order[p.index] for p in greedy_cover(matrix)]
            covers[m] = root / v / m / "cover.json"
            write_json(covers[m], {"greedy": [{"scale": t.scale, "row": t.row, "col": t.col} for t in greedy]})
            predictions[m] = root / v / f"{m}.parquet"
            wrong = (labels[None, :] + 1 + rng.integers(0, 998, matrix.shape)) % 1000
            pred = np.where(matrix, labels[None, :], wrong).T.ravel().astype(np.int16)  # images, then transforms
            table = pa.table(
                {
                    "image_id": pa.DictionaryArray.from_arrays(
                        np.repeat(np.arange(N_IMAGES, dtype=np.int32), len(order)), [r.image_id for r in records]
                    ),
                    "scale": np.tile([t.scale for t in order], N_IMAGES).astype(np.int16),
                    "row": np.tile([t.row for t in order], N_IMAGES).astype(np.int8),
                    "col": np.tile([t.col for t in order], N_IMAGES).astype(np.int8),
                    "pred": pred,
                    "pred_full": pred,
                    "conf": rng.random(pred.size, dtype=np.float32),
                }
            )
            write_parquet(predictions[m], table, {"scales": paper_scales()})
    return records, matrices, covers, predictions


def page_seconds(site: Path, profile: Path) -> dict[str, float]:
    """Seconds headless Chromium takes to show the first page, and to show the images no model solves sorted by
    dataset order (a pass over the whole index, then the shards of the page's images)."""
    ready = "document.body?.dataset.ready === '1'"
    with Chromium(profile) as chrome:
        start = time.perf_counter()
        chrome.open((site / "index.html").as_uri())
        chrome.wait_for(ready)
        first = time.perf_counter() - start
        start = time.perf_counter()
        chrome.evaluate(
            "(() => { const s = document.getElementById('filter'); s.value = 'unsolved'; "
            "s.dispatchEvent(new Event('change')); })()"
        )
        chrome.wait_for(ready)
        unsolved = time.perf_counter() - start
        # only the sample has pictures: the others' thumbnails and crops are missing here, as expected
        errors = [e for e in chrome.errors if not e.endswith(".jpg")]
        if errors:
            raise RuntimeError(f"the page logged errors: {errors}")
    return {"first_page": round(first, 2), "filter_unsolved": round(unsolved, 2)}


def main() -> None:
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        records, matrices, covers, predictions = fabricate(root, rng)
        print(
            f"fabricated {N_IMAGES} images x {len(MODELS)} models x {len(VARIANTS)} variants "
            f"in {time.perf_counter() - start:.0f} s"
        )
        site = root / "browser"
        start = time.perf_counter()
        correctness = read_scored_matrices(matrices)
        shown = write_browser_data(
            site / "data" / "bench",
            scored="bench",
            dataset="bench",
            label_set="in",
            records=records,
            correctness=correctness,
            covers=covers,
            predictions=predictions,
            max_images=N_IMAGES,
            page_size=24,
            predictions_shown=3,
        )
        data_seconds = time.perf_counter() - start
        data_bytes, data_files = folder_size(site / "data")
        index_bytes = (site / "data" / "bench" / "index.js").stat().st_size
        start = time.perf_counter()
        write_thumbnails(records, site / "thumbnails" / "bench", max_images=SAMPLE, size=THUMBNAIL_SIZE)
        thumb_seconds = time.perf_counter() - start
        thumb_bytes, _ = folder_size(site / "thumbnails")
        original = read_scored_matrices({(m, "original"): matrices[m, "original"] for m in MODELS})
        start = time.perf_counter()
        n_crops = write_crops(
            records,
            "in",
            original,
            covers,
            site / "crops" / "bench",
            max_images=SAMPLE,
            size=THUMBNAIL_SIZE,
            crop_sizes=dict.fromkeys(MODELS, CROP_SIZE),
        )
        crop_seconds = time.perf_counter() - start
        crop_bytes, _ = folder_size(site / "crops")
        write_site(site, [{"name": "bench", "dataset": "bench", "label_set": "in"}])
        page = page_seconds(site, root / "profile") if CHROMIUM else None
    per_image = {
        "thumbnail_ms": 1000 * thumb_seconds / SAMPLE,
        "thumbnail_kb": thumb_bytes / SAMPLE / 1024,
        "crops_ms": 1000 * crop_seconds / SAMPLE,
        "crops_kb": crop_bytes / SAMPLE / 1024,
        "crops_per_image": n_crops / SAMPLE,
    }
    result = {
        "n_images": shown,
        "models": len(MODELS),
        "variants": len(VARIANTS),
        "transforms": 324,
        "data_seconds": round(data_seconds, 2),
        "data_mb": round(data_bytes / 2**20, 1),
        "data_files": data_files,
        "index_mb": round(index_bytes / 2**20, 2),
        "sample": SAMPLE,
        "per_image": {k: round(v, 2) for k, v in per_image.items()},
        "pictures_50k_minutes": round((thumb_seconds + crop_seconds) / SAMPLE * N_IMAGES / 60, 1),
        "pictures_50k_mb": round((thumb_bytes + crop_bytes) / SAMPLE * N_IMAGES / 2**20),
        "page_seconds": page,
    }
    print(json.dumps(result, indent=2))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
