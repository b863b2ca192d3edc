from pathlib import Path

from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.inference.parts import merge_parts

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    parts = list(zip(map(Path, sm.input.predictions), map(Path, sm.input.aggregates), strict=True))
    image_ids = [r.image_id for r in read_manifest(sm.input.manifest)]
    metadata = merge_parts(parts, Path(sm.output.predictions), Path(sm.output.aggregates), image_ids)
    print(f"merged {len(parts)} parts: {metadata['n_images']} images, {metadata['crops_per_second']} crops/s")
