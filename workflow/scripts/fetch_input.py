from zoomeval.core.logs import to_file
from zoomeval.datasets.inputs import fetch, plan_all
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    fetch(plan_all(typed_config(sm.config))[tuple(sm.params.input)])
