# Stage 3: every model over every zoom transform of every image -> one Parquet file per job.


rule predict:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        masks=masks_input,
        weights=weights_input,
        head=head_input,
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


# The zero-shot head of an open_clip model, computed once and read by all its predict and standard_eval jobs.
rule zero_shot_head:
    input:
        unpack(head_job_inputs),
    output:
        head="results/zero_shot/{head}.safetensors",
    log:
        "logs/zero_shot/{head}.log",
    wildcard_constraints:
        head=_alternation(HEADS),
    conda:
        CONDA_ENV
    threads: workflow.cores
    resources:
        gpu=GPU_PER_JOB,
    params:
        # what the head depends on (not mean, std or input_size: they change the zoom grid only)
        model=lambda wc: {k: v for k, v in HEADS[wc.head].entry().items() if k not in ("mean", "std", "input_size")},
    script:
        "../scripts/zero_shot_head.py"


# The standard evaluation: each model once per image through its own evaluation transform (original images).
rule standard_eval:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        weights=weights_input,
        head=head_input,
    output:
        predictions="results/standard/{dataset}/{model}.parquet",
    log:
        "logs/standard/{dataset}/{model}.log",
    conda:
        CONDA_ENV
    threads: workflow.cores
    resources:
        gpu=GPU_PER_JOB,
    params:
        # the weights' own transform and normalisation: the entry's mean/std (the zoom grid's) do not apply
        model=lambda wc: {k: v for k, v in CFG.models[wc.model].entry().items() if k not in ("mean", "std")},
        class_set=lambda wc: CFG.datasets[wc.dataset].class_set,
        precision=CFG.inference.precision,
        store_top5=CFG.inference.store_top5,
    script:
        "../scripts/standard_eval.py"
