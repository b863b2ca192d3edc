from zoomeval.core.images import bad_kinds
from zoomeval.core.io import read_metadata
from zoomeval.core.left_out import LeftOut
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.registries import typed_config
from zoomeval.report.tta_table import score_tta, write_table_tta

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config = typed_config(sm.config)
    manifests = {read_metadata(path)["dataset"]: read_manifest(path) for path in sm.input.manifests}
    results = [score_tta(path, manifests[read_metadata(path)["dataset"]]) for path in sm.input.predictions]
    adapters = {name: entry.adapter for name, entry in config.datasets.items()}
    # a tta job scores every image of its manifest: only the bad images are left out
    left = {d: LeftOut(d, bad_kinds(path)) for d, path in zip(sm.params.datasets, sm.input.bad_images, strict=True)}
    write_table_tta(
        results, adapters, dict(config.tta.paper_models), sm.output.csv, sm.output.md, left, sm.params.limit
    )
