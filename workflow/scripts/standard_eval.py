from pathlib import Path

from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest
from zoomeval.datasets.build import class_indices
from zoomeval.inference.standard_eval import evaluate_to_file
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    records = read_manifest(sm.input.manifest)
    metadata = evaluate_to_file(
        sm.output.predictions,
        records,
        config.models[sm.wildcards.model],
        config.inference.for_job(sm.threads),
        dataset=dataset,
        class_indices=class_indices(config.datasets[dataset].class_set, records, read_classes(sm.input.manifest)),
        weights=Path(sm.input.weights) if sm.input.weights else None,
        head=Path(sm.input.head) if sm.input.head else None,
    )
    print(f"{metadata['n_images']} images in {metadata['seconds']} s")
