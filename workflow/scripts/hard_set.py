import logging

from zoomeval.browser.data import read_scored_matrices
from zoomeval.browser.hard_set import write_hard_set
from zoomeval.core.images import bad_kinds
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    paths = {(m, "original"): p for m, p in zip(sm.params.models, sm.input.matrices, strict=True)}
    n = write_hard_set(
        sm.output[0],
        read_manifest(sm.input.manifest),
        sm.params.label_set,
        read_scored_matrices(paths),
        name=sm.wildcards.scored,
        dataset=sm.params.dataset,
        labels_path=sm.input.labels or None,
        bad=bad_kinds(sm.input.bad_images),
    )
    logging.info("%d hard images in %s", n, sm.output[0])
