"""The browser's pictures, made once per dataset (thumbnails) and per scored dataset (crops) and cached as files
that the page loads lazily: a thumbnail of each sampled image, and for each model the crop of the first transform
in its greedy order that solves the image on the original images, cut with the public :func:`zoom_crop`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image

from zoomeval.analysis.label_sets import relabel
from zoomeval.browser.data import (
    ScoredMatrices,
    crop_name,
    first_solving,
    greedy_rows,
    sample_indices,
    thumbnail_name,
)
from zoomeval.core.images import load_rgb
from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import zoom_crop

JPEG_QUALITY = 85


def _save_jpeg(image: Image.Image, path: Path) -> None:
    with atomic_path(path) as tmp:
        image.save(tmp, format="JPEG", quality=JPEG_QUALITY)


def _shrunk(image: Image.Image, size: int) -> Image.Image:
    """``image`` with its longer side at most ``size`` (bicubic, antialiased), aspect kept."""
    image = image.copy()
    image.thumbnail((size, size), Image.Resampling.BICUBIC)
    return image


def _run(jobs: list[Callable[[], None]], threads: int) -> None:
    with ThreadPoolExecutor(max(1, threads)) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def write_thumbnails(
    records: list[Record], out_dir: str | os.PathLike[str], *, max_images: int, size: int, threads: int = 1
) -> int:
    """A JPEG thumbnail (longer side ``size``) of each sampled image, named by its manifest position; returns the
    count. The image is decoded as evaluated (``border`` cropped), so the manifest's boxes fit it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def job(i: int) -> Callable[[], None]:
        return lambda: _save_jpeg(_shrunk(load_rgb(records[i]), size), out / thumbnail_name(i))

    sample = [int(i) for i in sample_indices(len(records), max_images)]
    _run([job(i) for i in sample], threads)
    return len(sample)


def write_crops(
    records: list[Record],
    label_set: str,
    correctness: ScoredMatrices,
    covers: Mapping[str, str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    max_images: int,
    size: int,
    crop_sizes: Mapping[str, int],
    threads: int = 1,
    labels_path: str | None = None,
) -> int:
    """For each sampled image and model that solves it on the original images, the crop of the first greedy pick
    that solves it (:func:`zoom_crop` at ``crop_sizes[model]``, shrunk to ``size``), named by manifest position and
    model; returns the count. ``correctness`` holds the original variant's matrices under ``label_set`` (its labels
    file: ``labels_path``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if [r.image_id for r in relabel(records, label_set, labels_path)] != correctness.image_ids:
        raise ValueError("the correctness matrices do not belong to the manifest; re-run the analysis")
    column = {image_id: j for j, image_id in enumerate(correctness.image_ids)}
    sample = [int(i) for i in sample_indices(len(records), max_images) if records[i].image_id in column]
    firsts = {}
    for m in correctness.models:
        matrix = correctness.matrices[m, "original"]
        firsts[m] = first_solving(matrix, greedy_rows(covers[m], correctness.order))
    wanted = {
        i: [
            (m, correctness.order[firsts[m][column[records[i].image_id]]])
            for m in correctness.models
            if firsts[m][column[records[i].image_id]] >= 0
        ]
        for i in sample
    }

    def job(i: int) -> Callable[[], None]:
        def cut() -> None:
            image = load_rgb(records[i])
            for m, t in wanted[i]:
                crop = zoom_crop(image, t.scale, t.row, t.col, crop_sizes[m])
                _save_jpeg(_shrunk(crop, size), out / crop_name(i, m))

        return cut

    _run([job(i) for i in sample if wanted[i]], threads)
    return sum(len(w) for w in wanted.values())
