from zoomeval.contact_sheet import contact_sheet
from zoomeval.logs import to_file
from zoomeval.manifest import read_manifest
from zoomeval.masks import read_masks

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    contact_sheet(read_manifest(sm.input.manifest), read_masks(sm.input.masks), sm.output.png)
