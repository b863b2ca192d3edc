from pathlib import Path

from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest
from zoomeval.datasets.build import class_indices
from zoomeval.inference.predict import predict_to_file
from zoomeval.masks.boxes import read_masks
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    records = read_manifest(sm.input.manifest)
    settings = config.inference.for_job(sm.threads)
    metadata = predict_to_file(
        sm.output.predictions,
        sm.output.aggregates,
        records,
        config.models[sm.wildcards.model],
        list(config.scales),
        settings,
        dataset=dataset,
        variant=sm.wildcards.variant,
        masks=read_masks(sm.input.masks) if sm.input.masks else None,
        class_indices=class_indices(config.datasets[dataset].class_set, records, read_classes(sm.input.manifest)),
        max_pixels=config.max_resized_pixels,
        weights=Path(sm.input.weights) if sm.input.weights else None,
        head=Path(sm.input.head) if sm.input.head else None,
    )
    print(f"{metadata['n_images']} images, {metadata['crops_per_second']} crops/s")
