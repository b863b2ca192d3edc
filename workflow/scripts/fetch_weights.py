from pathlib import Path

from zoomeval.core.logs import to_file
from zoomeval.inference.models import fetch_weights
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config = typed_config(sm.config)
    fetch_weights(config.models[sm.params.model], Path(sm.output[0]), config.resources)
