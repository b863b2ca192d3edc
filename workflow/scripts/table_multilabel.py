from zoomeval.analysis.class_groups import class_groups
from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.multilabel_scores import one_crop_predictions, score
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.datasets.multilabel import read_coverage, read_dataset_labels
from zoomeval.report.multilabel_table import write_table_multilabel

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    groups = class_groups()
    scores = []
    for row in sm.params.rows:
        scores.append(
            score(
                row["dataset"],
                one_crop_predictions(row["predictions"]),
                read_manifest(row["manifest"]),
                read_dataset_labels(row["labels"]),
                read_coverage(row["labels"]),
                groups,
                read_metrics(row["metrics"]),
            )
        )
    adapters = {row["dataset"]: row["adapter"] for row in sm.params.rows}
    write_table_multilabel(scores, adapters, sm.output.csv, sm.output.md, sm.params.limit)
