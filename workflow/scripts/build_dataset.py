import os
from pathlib import Path

from zoomeval.core.images import screen
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import write_manifest
from zoomeval.datasets.build import build_records

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    name = sm.wildcards.dataset
    out = Path(sm.output.manifest).parent
    records, classes = build_records(name, sm.params.entry, out, Path("resources") / name)
    workers = min(sm.threads, os.cpu_count() or 1)
    kept, excluded = screen(
        records,
        sm.params.on_bad_image,
        sm.output.bad_images,
        dataset=name,
        max_scale=sm.params.max_scale,
        max_pixels=sm.params.max_resized_pixels,
        workers=workers,
    )
    write_manifest(sm.output.manifest, kept, name, classes, excluded)
    class_set = "all 1000" if classes is None else len(classes)
    print(f"{len(kept)} images ({excluded} bad, left out), class set: {class_set}")
