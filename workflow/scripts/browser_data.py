import logging

from zoomeval.browser.data import read_scored_matrices, write_browser_data
from zoomeval.core.images import bad_kinds
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    browser, models, variants = typed_config(sm.config).browser, sm.params.models, sm.params.variants
    keys = [(m, v) for m in models for v in variants]  # the rule lists the matrices in this order
    n = write_browser_data(
        sm.output[0],
        scored=sm.wildcards.scored,
        dataset=sm.params.dataset,
        label_set=sm.params.label_set,
        records=read_manifest(sm.input.manifest),
        correctness=read_scored_matrices(dict(zip(keys, sm.input.matrices, strict=True))),
        covers=dict(zip(models, sm.input.covers, strict=True)),
        predictions=dict(zip(models, sm.input.predictions, strict=True)),
        max_images=browser.max_images,
        page_size=browser.page_size,
        predictions_shown=browser.predictions_shown,
        labels_path=sm.input.labels or None,  # only label sets with a labels file have one
        bad=bad_kinds(sm.input.bad_images),
        limit=sm.params.limit,
    )
    logging.info("%d images in %s", n, sm.output[0])
