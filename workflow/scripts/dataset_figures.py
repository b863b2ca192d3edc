from zoomeval.analysis.metrics import read_metrics
from zoomeval.core.logs import to_file
from zoomeval.report.figure_data import upper_bounds, variant_accuracy
from zoomeval.report.figures import plot_upper_bounds, plot_variant_bars

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    metrics = [read_metrics(path) for path in sm.input.metrics]
    name = sm.wildcards.scored
    bounds = upper_bounds(metrics)
    plot_upper_bounds(bounds, sm.output.upper_bounds, f"1 crop, top-{bounds.top_k} and all transforms: {name}")
    plot_variant_bars(variant_accuracy(metrics), sm.output.variants, f"Upper bound by variant: {name}")
