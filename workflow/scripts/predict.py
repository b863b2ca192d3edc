import os

from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_classes, read_manifest
from zoomeval.datasets.build import class_indices
from zoomeval.inference.models import ModelSpec
from zoomeval.inference.predict import Settings, predict_to_file
from zoomeval.masks.boxes import read_masks

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    records = read_manifest(sm.input.manifest)
    inference = sm.config["inference"]
    settings = Settings(
        batch_size=inference["batch_size"],
        device=inference["device"],
        num_workers=inference["num_workers"],
        threads=inference["threads"] or min(sm.threads, os.cpu_count() or 1),
        precision=sm.params.precision,
        resize_backend=sm.params.resize_backend,
        compile=inference["compile"],
        store_top5=sm.params.store_top5,
        shard_images=inference["shard_images"],
    )
    metadata = predict_to_file(
        sm.output.predictions,
        sm.output.aggregates,
        records,
        ModelSpec.from_config(sm.wildcards.model, sm.params.model),
        list(sm.params.scales),
        settings,
        dataset=sm.wildcards.dataset,
        variant=sm.wildcards.variant,
        masks=read_masks(sm.input.masks) if sm.input.masks else None,
        class_indices=class_indices(sm.params.class_set, records, read_classes(sm.input.manifest)),
        max_pixels=sm.config["max_resized_pixels"],
    )
    print(f"{metadata['n_images']} images, {metadata['crops_per_second']} crops/s")
