from pathlib import Path

from zoomeval.core.logs import to_file
from zoomeval.study.index import write_index

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    write_index(sm.output.index, Path("."), [str(p) for p in sm.input.metrics])
