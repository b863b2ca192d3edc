import os

from zoomeval.datasets import class_indices
from zoomeval.inference import Settings, predict, write_predictions
from zoomeval.logs import to_file
from zoomeval.manifest import read_manifest
from zoomeval.masks import read_masks
from zoomeval.models import ModelSpec

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    records = read_manifest(sm.input.manifest)
    masks = read_masks(sm.input.masks) if sm.input.masks else None
    inference = sm.config["inference"]
    settings = Settings(
        batch_size=inference["batch_size"],
        device=inference["device"],
        num_workers=inference["num_workers"],
        threads=inference["threads"] or min(sm.threads, os.cpu_count() or 1),
        precision=sm.params.precision,
        store_top5=sm.params.store_top5,
    )
    table, metadata = predict(
        records,
        ModelSpec.from_config(sm.wildcards.model, sm.params.model),
        list(sm.params.scales),
        settings,
        dataset=sm.wildcards.dataset,
        variant=sm.wildcards.variant,
        masks=masks,
        class_indices=class_indices(sm.params.dataset, records),
    )
    write_predictions(sm.output.predictions, table, metadata)
    print(f"{table.num_rows} rows, {metadata['crops_per_second']} crops/s")
