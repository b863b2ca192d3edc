import logging

from zoomeval.analysis.matrix import read_geometry
from zoomeval.browser.data import read_scored_matrices
from zoomeval.browser.images import write_crops
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    browser, models = typed_config(sm.config).browser, sm.params.models
    correctness = read_scored_matrices({(m, "original"): p for m, p in zip(models, sm.input.matrices, strict=True)})
    n = write_crops(
        read_manifest(sm.input.manifest),
        sm.params.label_set,
        correctness,
        dict(zip(models, sm.input.covers, strict=True)),
        sm.output[0],
        max_images=browser.max_images,
        size=browser.thumbnail_size,
        crop_sizes={m: read_geometry(p)[1] for m, p in zip(models, sm.input.matrices, strict=True)},
        threads=sm.threads,
        labels_path=sm.input.labels or None,  # only label sets with a labels file have one
    )
    logging.info("%d crops in %s", n, sm.output[0])
