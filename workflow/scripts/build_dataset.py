import os
from pathlib import Path

from zoomeval.core.images import screen
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import write_manifest
from zoomeval.datasets.build import build_records, first_images
from zoomeval.datasets.inputs import hub_revision, local_path, plan_all
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config, name = typed_config(sm.config), sm.wildcards.dataset
    dataset, inputs = config.datasets[name], plan_all(config)
    paths = {key: local_path(inputs[name, key]) for key in dataset.inputs}
    records, classes = build_records(dataset, paths, Path(sm.output.manifest).parent / "images")
    kept, excluded = screen(
        first_images(records, config.limit),
        config.on_bad_image,
        sm.output.bad_images,
        dataset=name,
        max_scale=max(config.scales),
        max_pixels=config.max_resized_pixels,
        workers=min(sm.threads, os.cpu_count() or 1),
    )
    revisions = {key: commit for key in dataset.inputs if (commit := hub_revision(inputs[name, key]))}
    write_manifest(sm.output.manifest, kept, name, classes, excluded, revisions or None)
    class_set = "all 1000" if classes is None else len(classes)
    print(f"{len(kept)} images ({excluded} bad, left out), class set: {class_set}")
