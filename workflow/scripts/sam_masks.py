from contextlib import ExitStack

import torch

from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.devices import gpu_slot, resolve_device
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.datasets.inputs import local_path, plan_all
from zoomeval.masks.sam import write_sam_masks
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]), ExitStack() as stack:
    keep_freed_memory()  # before the model allocates anything
    config = typed_config(sm.config)
    sam = config.sam
    device = stack.enter_context(gpu_slot(sam.device, torch.cuda.device_count()))
    write_sam_masks(
        sm.output.masks,
        read_manifest(sm.input.manifest),
        dataset=sm.wildcards.dataset,
        method=sm.wildcards.method,
        model_type=sam.model_type,
        checkpoint=local_path(plan_all(config)["sam", "checkpoint"]),
        device=resolve_device(device, "sam.device"),
        counting=sam.counting,
        generator_options=sam.generator,
    )
