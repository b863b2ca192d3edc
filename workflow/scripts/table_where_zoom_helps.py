from zoomeval.core.logs import to_file
from zoomeval.report.where_zoom_helps import read_cell, write_table_where_zoom_helps

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    # one (manifest, matrix, metrics, choices) per (scored dataset, model), in the order of params.cells
    inputs = (sm.input.manifests, sm.input.matrices, sm.input.metrics, sm.input.choices)
    files = zip(sm.params.cells, *inputs, strict=True)
    cells = [read_cell(model, scored, paths, sm.params.budget) for (scored, model), *paths in files]
    write_table_where_zoom_helps(cells, sm.output.csv, sm.output.md, sm.params.limit)
