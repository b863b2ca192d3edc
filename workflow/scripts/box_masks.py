from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.masks.boxes import write_box_masks

with to_file(snakemake.log[0]):  # noqa: F821 (snakemake is injected by the script directive)
    records = read_manifest(snakemake.input.manifest)  # noqa: F821
    write_box_masks(snakemake.output.masks, records, snakemake.wildcards.dataset)  # noqa: F821
