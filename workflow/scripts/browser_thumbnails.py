import logging

from zoomeval.browser.images import write_thumbnails
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    browser = typed_config(sm.config).browser
    n = write_thumbnails(
        read_manifest(sm.input.manifest),
        sm.output[0],
        max_images=browser.max_images,
        size=browser.thumbnail_size,
        threads=sm.threads,
    )
    logging.info("%d thumbnails in %s", n, sm.output[0])
