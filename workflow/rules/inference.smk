# Stage 3: every model over every zoom transform of every image -> one Parquet file per job. With
# inference.parts > 1, predict writes part {part} of a job (a run of whole shards, one GPU) to a temporary file
# and merge_predictions joins the parts into the same files one job writes.


rule predict:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        masks=masks_input,
        weights=weights_input,
    output:
        predictions=part_output(f"{PREDICTIONS}{PART}.parquet"),
        aggregates=part_output(f"{PREDICTIONS}{PART}.aggregates.parquet"),
    log:
        f"logs/predictions/{{dataset}}/{{variant}}/{{model}}{PART}.log",
    conda:
        CONDA_ENV
    # The parts of a job share the cores (all of them without parts).
    threads: max(1, workflow.cores // CFG.inference.parts)
    resources:
        gpu=GPU_PER_JOB,
    params:
        # Only settings that change the numbers are params (a change re-runs the job); batch size,
        # workers, threads, compile, shard size and parts are read from the typed config by the script.
        model=lambda wc: CFG.models[wc.model].entry(),
        class_set=lambda wc: CFG.datasets[wc.dataset].class_set,
        scales=list(CFG.scales),
        precision=CFG.inference.precision,
        resize_backend=CFG.inference.resize_backend,
        store_top5=CFG.inference.store_top5,
    script:
        "../scripts/predict.py"


if CFG.inference.parts > 1:

    rule merge_predictions:
        input:
            manifest="results/datasets/{dataset}/manifest.parquet",
            predictions=expand(
                f"{PREDICTIONS}.part{{part}}.parquet", part=range(CFG.inference.parts), allow_missing=True
            ),
            aggregates=expand(
                f"{PREDICTIONS}.part{{part}}.aggregates.parquet", part=range(CFG.inference.parts), allow_missing=True
            ),
        output:
            predictions=f"{PREDICTIONS}.parquet",
            aggregates=f"{PREDICTIONS}.aggregates.parquet",
        log:
            "logs/predictions/{dataset}/{variant}/{model}.merge.log",
        conda:
            CONDA_ENV
        script:
            "../scripts/merge_predictions.py"
