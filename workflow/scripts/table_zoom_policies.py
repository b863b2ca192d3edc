from zoomeval.analysis.policy_eval import POLICIES_DOCUMENT
from zoomeval.core.logs import to_file
from zoomeval.report.zoom_policies import memo_rows, write_table_zoom_policies

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    documents = [POLICIES_DOCUMENT.read(path) for path in sm.input.documents]
    memo = memo_rows(sm.input.tta, documents, sm.params.memo_passes) if sm.input.tta else []
    write_table_zoom_policies(documents, memo, sm.output.csv, sm.output.md, sm.params.limit)
