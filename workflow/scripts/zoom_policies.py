from zoomeval.analysis.metrics import read_metrics
from zoomeval.analysis.policy_choices import write_choices
from zoomeval.analysis.policy_eval import cv_outputs, transfer_document
from zoomeval.core.allocator import keep_freed_memory
from zoomeval.core.io import write_json
from zoomeval.core.logs import to_file
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    keep_freed_memory()  # the greedy steps' and folds' large temporaries are reused, not mapped again
    settings = typed_config(sm.config).policies
    metrics = read_metrics(sm.input.metrics)
    if "source_matrix" in sm.input.keys():
        source = (sm.input.source_matrix, sm.input.source_predictions)
        target = (sm.input.matrix, sm.input.predictions)
        document = transfer_document(source, target, metrics, sm.wildcards.source, settings)
    else:
        document, choices = cv_outputs(sm.input.matrix, sm.input.predictions, metrics, settings)
        head = ("model", "variant", "dataset", "protocol", "seed")
        write_choices(sm.output.choices, choices, **{k: document[k] for k in head})
    write_json(sm.output[0], document)
