# Stage 3: every model over every zoom transform of every image -> one Parquet file per job. With
# inference.parts > 1, predict writes part {part} of a job (a run of whole shards, one GPU) to a temporary file
# and merge_predictions joins the parts into the same files one job writes. An open_clip model's zero-shot head
# is a job of its own, read by its predict and standard_eval jobs; standard_eval runs each model once per image
# through its own evaluation transform.


rule predict:
    input:
        manifest=LAYOUT.path("manifest"),
        masks=masks_input,
        weights=weights_input,
        head=head_input,
    output:
        predictions=part_output(LAYOUT.path(f"predictions{PART}")),
        aggregates=part_output(LAYOUT.path(f"aggregates{PART}")),
    log:
        LAYOUT.log(f"predict{PART}"),
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
        resize_backend=CFG.inference.crop_pixels,
        store_top5=CFG.inference.store_top5,
    script:
        "../scripts/predict.py"


if CFG.inference.parts > 1:

    rule merge_predictions:
        input:
            manifest=LAYOUT.path("manifest"),
            predictions=expand(LAYOUT.path("predictions_part"), part=range(CFG.inference.parts), allow_missing=True),
            aggregates=expand(LAYOUT.path("aggregates_part"), part=range(CFG.inference.parts), allow_missing=True),
        output:
            predictions=LAYOUT.path("predictions"),
            aggregates=LAYOUT.path("aggregates"),
        log:
            LAYOUT.log("merge_predictions"),
        conda:
            CONDA_ENV
        script:
            "../scripts/merge_predictions.py"


# The zero-shot head of an open_clip model, computed once and read by all its predict and standard_eval jobs.
rule zero_shot_head:
    input:
        unpack(head_job_inputs),
    output:
        head=LAYOUT.path("zero_shot_head"),
    log:
        LAYOUT.log("zero_shot_head"),
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
        manifest=LAYOUT.path("manifest"),
        weights=weights_input,
        head=head_input,
    output:
        predictions=LAYOUT.path("standard"),
    log:
        LAYOUT.log("standard_eval"),
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
