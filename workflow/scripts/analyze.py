from zoomeval.analysis.exact_cover import CoverLimits
from zoomeval.analysis.scoring import analyze_predictions, write_analysis
from zoomeval.core.images import bad_kinds
from zoomeval.core.io import read_metadata
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config = typed_config(sm.config)
    analysis = analyze_predictions(
        sm.input.predictions,
        read_manifest(sm.input.manifest),
        top_k=config.top_k,
        label_set=sm.params.label_set,
        limits=CoverLimits(config.cover_node_limit, config.cover_time_limit),
        n_excluded=read_metadata(sm.input.manifest).get("n_excluded", 0),
        bad=bad_kinds(sm.input.bad_images),
        aggregates_path=sm.input.aggregates,
        labels_path=sm.input.labels or None,  # only label sets with a labels file have one
        standard_path=str(sm.input.standard) if sm.input.standard else None,
    )
    write_analysis(analysis, sm.output.metrics, sm.output.cover, sm.output.matrix)
