from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.checksums import sha256_file
from zoomeval.core.devices import gpu_slot
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest, read_revisions
from zoomeval.core.zoom import ZoomGrid
from zoomeval.datasets.build import class_indices
from zoomeval.inference.predict import predict_to_file
from zoomeval.masks.boxes import read_masks
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]), ExitStack() as stack:
    keep_freed_memory()  # before the model allocates anything
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    inference = config.inference
    # With several GPUs on this machine, parallel jobs (parts, models) each take a GPU of their own.
    device = stack.enter_context(gpu_slot(inference.device, torch.cuda.device_count()))
    records = read_manifest(sm.input.manifest)
    settings = replace(inference.for_job(sm.threads), device=device)
    job = dict(
        dataset=dataset,
        variant=sm.wildcards.variant,
        masks=read_masks(sm.input.masks) if sm.input.masks else None,
        # The whole manifest's class set, also in a part job.
        class_indices=class_indices(config.datasets[dataset].class_set, records, read_classes(sm.input.manifest)),
        max_pixels=config.max_resized_pixels,
        weights=Path(sm.input.weights) if sm.input.weights else None,
        head=Path(sm.input.head) if sm.input.head else None,
        # in the metadata (and the shards' identity) only where there is one, so other files' shards are reused
        inputs={
            key: value
            for key, value in (
                ("dataset_adapter", config.datasets[dataset].adapter),  # what published results match it by
                ("dataset_revisions", read_revisions(sm.input.manifest)),
                ("masks_sha256", sha256_file(sm.input.masks) if sm.input.masks else None),
            )
            if value
        },
    )
    grid = ZoomGrid(config.scales)
    outputs = (sm.output.predictions, sm.output.aggregates, records, config.models[sm.wildcards.model])
    part = (int(sm.wildcards.part), inference.parts) if "part" in sm.wildcards.keys() else None
    metadata = predict_to_file(*outputs, grid, settings, part=part, **job)
    print(f"{metadata['n_images']} images, {metadata.get('crops_per_second')} crops/s")
