from pathlib import Path

from zoomeval.datasets import build_records
from zoomeval.logs import to_file
from zoomeval.manifest import write_manifest

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    name = sm.wildcards.dataset
    out = Path(sm.output.manifest).parent
    records, classes = build_records(name, sm.params.entry, out, Path("resources") / name)
    write_manifest(sm.output.manifest, records, name, classes)
    print(f"{len(records)} images, class set: {'all 1000' if classes is None else len(classes)}")
