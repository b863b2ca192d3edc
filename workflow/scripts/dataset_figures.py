import json

from zoomeval.figures import plot_upper_bounds, plot_variant_bars
from zoomeval.logs import to_file

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    rows = [json.loads(open(path).read()) for path in sm.input.metrics]
    name, top_k = sm.wildcards.scored, sm.params.top_k
    # the 1 -> top-k -> all figure is about the original images where the dataset has them
    original = [r for r in rows if r["variant"] == "original"] or rows
    plot_upper_bounds(original, sm.output.upper_bounds, f"1 crop, top-{top_k} and all transforms: {name}", top_k)
    plot_variant_bars(rows, sm.output.variants, f"Upper bound by variant: {name}")
