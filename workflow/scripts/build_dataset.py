from pathlib import Path

from zoomeval.datasets import build_records
from zoomeval.logs import to_file
from zoomeval.manifest import write_manifest

with to_file(snakemake.log[0]):  # noqa: F821 (snakemake is injected by the script directive)
    out = Path(snakemake.output.manifest).parent  # noqa: F821
    records = build_records(snakemake.wildcards.dataset, snakemake.params.entry, out)  # noqa: F821
    write_manifest(snakemake.output.manifest, records, snakemake.wildcards.dataset)  # noqa: F821
    print(f"{len(records)} images")
