import json

from zoomeval.logs import to_file
from zoomeval.tables import write_table_1

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    write_table_1([json.loads(open(path).read()) for path in sm.input.metrics], sm.output.csv, sm.output.md)
