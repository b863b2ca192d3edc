from zoomeval.analysis.stats import object_counts, write_object_counts
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    method = typed_config(sm.config).datasets[sm.wildcards.dataset].count_method
    table = object_counts(read_manifest(sm.input.manifest), sm.input.masks or None, method)
    write_object_counts(sm.output.counts, table, sm.wildcards.dataset)
