import pyarrow.parquet as pq

from zoomeval.analysis.stats import mann_whitney_table, write_mann_whitney_csv
from zoomeval.core.logs import to_file
from zoomeval.registries import typed_config
from zoomeval.report.figure_data import count_shares
from zoomeval.report.figures import plot_count_distributions

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    stats = typed_config(sm.config).stats
    counts = {
        name: pq.read_table(path, columns=["n_objects"])["n_objects"].to_pylist()
        for name, path in zip(stats.datasets, sm.input.counts, strict=True)
    }
    write_mann_whitney_csv(sm.output.csv, mann_whitney_table(counts, list(stats.pairs)))
    plot_count_distributions(count_shares(counts), sm.output.png, "Objects per image")
