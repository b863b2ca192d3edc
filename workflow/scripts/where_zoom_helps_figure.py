from zoomeval.core.logs import to_file
from zoomeval.report.where_zoom_helps import plot_where_zoom_helps, read_cell

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    # one (matrix, metrics, choices) per model of params.models, over the scored dataset's one manifest
    files = zip(sm.params.models, sm.input.matrices, sm.input.metrics, sm.input.choices, strict=True)
    cells = [
        read_cell(model, sm.wildcards.scored, [sm.input.manifest, *paths], sm.params.budget) for model, *paths in files
    ]
    plot_where_zoom_helps(cells, sm.output[0], f"Where zoom helps on {sm.wildcards.scored} (original images)")
