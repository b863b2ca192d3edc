from dataclasses import asdict

from zoomeval.analysis import analyze_predictions
from zoomeval.io import read_metadata, write_json
from zoomeval.logs import to_file
from zoomeval.manifest import read_manifest

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    records = read_manifest(sm.input.manifest)
    metrics, cover = analyze_predictions(
        sm.input.predictions,
        records,
        sm.params.top_k,
        sm.params.label_set,
        sm.params.time_limit,
        sm.output.matrix,
        read_metadata(sm.input.manifest).get("n_excluded", 0),
        sm.input.aggregates,
    )
    write_json(sm.output.cover, {**asdict(metrics), **cover})
    write_json(sm.output.metrics, {**asdict(metrics), "top_k": sm.params.top_k})
