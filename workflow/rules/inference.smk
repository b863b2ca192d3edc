# Stage 3: every model over every zoom transform of every image -> one Parquet file per job.


rule predict:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        masks=masks_input,
        weights=weights_input,
    output:
        predictions="results/predictions/{dataset}/{variant}/{model}.parquet",
        aggregates="results/predictions/{dataset}/{variant}/{model}.aggregates.parquet",
    log:
        "logs/predictions/{dataset}/{variant}/{model}.log",
    conda:
        CONDA_ENV
    threads: workflow.cores
    resources:
        gpu=GPU_PER_JOB,
    params:
        # Only settings that change the numbers are params (a change re-runs the job); batch size,
        # workers, threads, compile and shard size are read from the typed config by the script.
        model=lambda wc: CFG.models[wc.model].entry(),
        class_set=lambda wc: CFG.datasets[wc.dataset].class_set,
        scales=list(CFG.scales),
        precision=CFG.inference.precision,
        resize_backend=CFG.inference.resize_backend,
        store_top5=CFG.inference.store_top5,
    script:
        "../scripts/predict.py"
