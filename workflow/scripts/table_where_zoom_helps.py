from zoomeval.analysis.matrix import read_matrix
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.where_zoom_helps import where_zoom_helps
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.report.where_zoom_helps import write_table_where_zoom_helps

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    cells = []
    # one (manifest, matrix, metrics) per (scored dataset, model), in the order of params.cells
    for (scored, model), manifest, matrix, metrics in zip(sm.params.cells, sm.input.manifests, sm.input.matrices,
                                                          sm.input.metrics, strict=True):  # fmt: skip
        rows, no_box = where_zoom_helps(read_manifest(manifest), *read_matrix(matrix))
        cells.append((model, scored, read_metrics(metrics).left_out, rows, no_box))
    write_table_where_zoom_helps(cells, sm.output.csv, sm.output.md)
