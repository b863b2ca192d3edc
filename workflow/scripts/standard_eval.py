from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.devices import gpu_slot
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest
from zoomeval.datasets.build import class_indices
from zoomeval.inference.standard_eval import evaluate_to_file
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]), ExitStack() as stack:
    keep_freed_memory()  # before the model allocates anything
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    device = stack.enter_context(gpu_slot(config.inference.device, torch.cuda.device_count()))
    records = read_manifest(sm.input.manifest)
    metadata = evaluate_to_file(
        sm.output.predictions,
        records,
        config.models[sm.wildcards.model],
        replace(config.inference.for_job(sm.threads), device=device),
        dataset=dataset,
        class_indices=class_indices(config.datasets[dataset].class_set, records, read_classes(sm.input.manifest)),
        weights=Path(sm.input.weights) if sm.input.weights else None,
        head=Path(sm.input.head) if sm.input.head else None,
    )
    print(f"{metadata['n_images']} images in {metadata['seconds']} s")
