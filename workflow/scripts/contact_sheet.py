from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.masks.boxes import read_masks
from zoomeval.masks.contact_sheet import contact_sheet

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    contact_sheet(read_manifest(sm.input.manifest), read_masks(sm.input.masks), sm.output.png)
