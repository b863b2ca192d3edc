from zoomeval.analysis.stats import object_counts, write_object_counts
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    table = object_counts(read_manifest(sm.input.manifest), sm.input.masks or None, sm.params.method)
    write_object_counts(sm.output.counts, table, sm.wildcards.dataset)
