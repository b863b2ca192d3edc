import json

from zoomeval.logs import to_file
from zoomeval.tables import write_table_aggregation

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    rows = [json.loads(open(path).read()) for path in sm.input.metrics]
    write_table_aggregation(rows, sm.output.csv, sm.output.md)
