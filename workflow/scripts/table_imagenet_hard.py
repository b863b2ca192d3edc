from zoomeval.analysis.metrics import read_metrics
from zoomeval.core.logs import to_file
from zoomeval.report.imagenet_hard import write_table_imagenet_hard

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    metrics = [read_metrics(path) for path in sm.input.metrics]
    write_table_imagenet_hard(metrics, sm.params.models, sm.output.csv, sm.output.md, sm.params.limit)
