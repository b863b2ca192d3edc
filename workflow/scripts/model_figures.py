from zoomeval.analysis.cover_breakdown import top_k_locations
from zoomeval.analysis.matrix import read_geometry, read_matrix
from zoomeval.analysis.metrics import read_greedy
from zoomeval.core.logs import to_file
from zoomeval.registries import typed_config
from zoomeval.report.figure_data import anchor_grid, centre_bias_grids, scale_curves
from zoomeval.report.figures import plot_anchor_grid, plot_centre_bias, plot_scale_curves, plot_top_k_locations

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    matrix, order, _ = read_matrix(sm.input.matrix)
    cover = [order.index(t) for t in read_greedy(sm.input.cover)]
    sizes, crop_size = read_geometry(sm.input.matrix)
    top_k = typed_config(sm.config).top_k
    name = f"{sm.wildcards.model}, {sm.wildcards.scored} ({sm.wildcards.variant})"
    plot_anchor_grid(anchor_grid(matrix, order), sm.output.anchors, f"Upper bound per anchor (%): {name}")
    plot_scale_curves(scale_curves(matrix, order), sm.output.scales, f"Accuracy by scale: {name}")
    locations = top_k_locations(cover, order, top_k)
    plot_top_k_locations(locations, sm.output.top_k, f"First {top_k} greedy picks: {name}")
    grids = centre_bias_grids(matrix, order, sizes, crop_size, cover)
    plot_centre_bias(grids, sm.output.centre_bias, f"Solved with the anchor region in view (%): {name}")
