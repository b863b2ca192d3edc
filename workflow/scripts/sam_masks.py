from pathlib import Path

from zoomeval.core.devices import resolve_device
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.datasets.sources import resolve
from zoomeval.masks.sam import CountFilter, write_sam_masks

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    sam = sm.params.sam
    write_sam_masks(
        sm.output.masks,
        read_manifest(sm.input.manifest),
        dataset=sm.wildcards.dataset,
        method=sm.wildcards.method,
        model_type=sam["model_type"],
        checkpoint=resolve(sam["checkpoint"], Path("resources") / "sam", unpack=False, key="sam.checkpoint"),
        device=resolve_device(sam.get("device", "auto"), "sam.device"),
        counting=CountFilter(**sam.get("counting", {})),
        generator_options=sam.get("generator", {}),
    )
