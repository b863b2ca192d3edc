import os
from pathlib import Path

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest
from zoomeval.datasets.build import class_indices
from zoomeval.inference.tta import run_tta_to_file
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    keep_freed_memory()  # before the model allocates anything
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    records = read_manifest(sm.input.manifest)
    metadata = run_tta_to_file(
        sm.output[0],
        records,
        config.models[sm.wildcards.model],
        sm.wildcards.method,
        dataset=dataset,
        settings=config.tta.memo(),
        seed=config.tta.seed,
        class_indices=class_indices(config.datasets[dataset].class_set, records, read_classes(sm.input.manifest)),
        device=config.inference.device,
        threads=config.inference.threads or min(sm.threads, os.cpu_count() or 1),
        weights=Path(sm.input.weights) if sm.input.weights else None,
        shard_images=config.inference.shard_images,
        head=Path(sm.input.head) if sm.input.head else None,
    )
    print(f"{metadata['n_images']} images, {metadata['seconds_per_image']} s/image on {metadata['device']}")
