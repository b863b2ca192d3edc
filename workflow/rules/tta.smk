# Stage 3b: test-time adaptation (MEMO with AugMix or RandomResizedCrop views) and the paper's Table 5, built by
# its own target results/table_tta.csv (not part of `all`).
from dataclasses import asdict

from zoomeval.core.config import TTA_METHODS

TTA_DATASETS = list(CFG.tta.datasets) or DATASETS
TTA_MODELS = list(CFG.tta.models) or MODELS
# The settings that change a MEMO method's numbers (none has none, so they never rerun it).
TTA_MEMO = {**asdict(CFG.tta.memo()), "seed": CFG.tta.seed}


rule tta:
    input:
        manifest=LAYOUT.path("manifest"),
        weights=weights_input,
        head=head_input,
    output:
        # update: Snakemake keeps the old file until the job renames the new one onto it (tta writes atomically),
        # so a killed forced rerun never leaves Table 5 without a file it read; the file is marked incomplete
        # instead, and the next run reruns the job (rerun-incomplete, profiles/default) and then the table.
        update(LAYOUT.path("tta")),
    log:
        LAYOUT.log("tta"),
    wildcard_constraints:
        method=_alternation(TTA_METHODS),
    conda:
        CONDA_ENV
    # all cores: jobs run one at a time, so their seconds per image compare
    threads: workflow.cores
    resources:
        gpu=GPU_PER_JOB,
    params:
        model=lambda wc: CFG.models[wc.model].entry(),
        class_set=lambda wc: CFG.datasets[wc.dataset].class_set,
        settings=lambda wc: {} if wc.method == "none" else TTA_MEMO,
    script:
        "../scripts/tta.py"


rule table_tta:
    input:
        predictions=[
            LAYOUT.path("tta", dataset=d, method=method, model=m)
            for method in CFG.tta.methods
            for m in TTA_MODELS
            for d in TTA_DATASETS
        ],
        manifests=[LAYOUT.path("manifest", dataset=d) for d in TTA_DATASETS],
        bad_images=[LAYOUT.path("bad_images", dataset=d) for d in TTA_DATASETS],
    output:
        csv=report(LAYOUT.path("table_tta", ext="csv"), caption="../report/table_tta.rst", category="Tables"),
        md=LAYOUT.path("table_tta", ext="md"),
    log:
        LAYOUT.log("table", table="table_tta"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        paper_models=dict(CFG.tta.paper_models),
        datasets=TTA_DATASETS,
    script:
        "../scripts/table_tta.py"
