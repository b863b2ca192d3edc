# Stage 4: 1-crop accuracy, upper bounds and the greedy minimum set cover per prediction file.


# {scored} is a dataset name, suffixed _<label set> for its other label sets (e.g. _real, _multilabel).
rule analyze:
    input:
        predictions=lambda wc: f"{RESULTS}/predictions/{SCORED[wc.scored][0]}/{wc.variant}/{wc.model}.parquet",
        aggregates=lambda wc: f"{RESULTS}/predictions/{SCORED[wc.scored][0]}/{wc.variant}/{wc.model}.aggregates.parquet",
        manifest=lambda wc: f"{RESULTS}/datasets/{SCORED[wc.scored][0]}/manifest.parquet",
        bad_images=bad_images_input,
        labels=labels_input,
        standard=lambda wc: (
            f"{RESULTS}/standard/{SCORED[wc.scored][0]}/{wc.model}.parquet" if wc.variant == "original" else []
        ),
    output:
        metrics=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/metrics.json",
        cover=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/cover.json",
        matrix=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/correct.npz",
    log:
        f"{LOGS}/analysis/{{scored}}/{{variant}}/{{model}}.log",
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        top_k=CFG.top_k,
        time_limit=CFG.cover_time_limit,
        label_set=lambda wc: SCORED[wc.scored][1],
    script:
        "../scripts/analyze.py"
