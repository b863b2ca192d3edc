from zoomeval.browser.hard_set import write_summary
from zoomeval.core.logs import to_file

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    write_summary(sm.input.hard_sets, sm.output.csv, sm.output.md, sm.params.limit)
