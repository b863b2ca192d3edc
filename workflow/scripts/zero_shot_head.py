from contextlib import ExitStack
from pathlib import Path

import torch

from zoomeval.core.devices import gpu_slot, resolve_device
from zoomeval.core.logs import to_file
from zoomeval.inference.models import head_name
from zoomeval.inference.sources.open_clip_models import build_head
from zoomeval.inference.zero_shot import write_head
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]), ExitStack() as stack:
    config = typed_config(sm.config)
    torch.set_num_threads(config.inference.for_job(sm.threads).threads)
    spec = next(s for s in config.models.values() if head_name(s, config.resources) == sm.wildcards.head)
    slot = stack.enter_context(gpu_slot(config.inference.device, torch.cuda.device_count()))
    head, provenance = build_head(spec, Path(sm.input.weights), resolve_device(slot, "inference.device"))
    write_head(sm.output.head, head, provenance)
    print(
        f"zero-shot head {tuple(head.shape)} from {len(provenance['template_list'])} templates, duplicate names: "
        f"{provenance['duplicate_names']['policy']}"
    )
