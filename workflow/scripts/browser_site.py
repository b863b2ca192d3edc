from pathlib import Path

from zoomeval.browser.site import write_site
from zoomeval.core.logs import to_file

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    write_site(Path(sm.output.html).parent, sm.params.datasets)
