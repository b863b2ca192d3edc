import json

from zoomeval.analysis import read_geometry, read_matrix, top_k_locations
from zoomeval.figures import (
    anchor_grid,
    plot_anchor_grid,
    plot_centre_bias,
    plot_scale_curves,
    plot_top_k_locations,
    scale_curves,
    visibility_grid,
)
from zoomeval.logs import to_file
from zoomeval.zoom import Transform

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    matrix, order, _ = read_matrix(sm.input.matrix)
    greedy = json.loads(open(sm.input.cover).read())["greedy"]
    cover = [order.index(Transform(p["scale"], p["row"], p["col"])) for p in greedy]
    name = f"{sm.wildcards.model}, {sm.wildcards.scored} ({sm.wildcards.variant})"
    plot_anchor_grid(anchor_grid(matrix, order), sm.output.anchors, f"Upper bound per anchor (%): {name}")
    plot_scale_curves(scale_curves(matrix, order), sm.output.scales, f"Accuracy by scale: {name}")
    locations = top_k_locations(cover, order, sm.params.top_k)
    plot_top_k_locations(locations, sm.output.top_k, f"First {sm.params.top_k} greedy picks: {name}")
    sizes, crop_size = read_geometry(sm.input.matrix)
    grids = {
        f"all {len(order)} transforms": visibility_grid(matrix, order, sizes, crop_size),
        f"greedy cover ({len(cover)} transforms)": visibility_grid(matrix, order, sizes, crop_size, cover),
    }
    plot_centre_bias(grids, sm.output.centre_bias, f"Solved with the anchor region in view (%): {name}")
