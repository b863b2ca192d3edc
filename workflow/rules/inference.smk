# Stage 3: every model over every zoom transform of every image -> one Parquet file per job.


def _masks(wc):
    if wc.variant == "original":
        return []
    return f"results/masks/{wc.dataset}/{config['datasets'][wc.dataset]['mask_method']}.parquet"


rule predict:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        masks=_masks,
    output:
        predictions="results/predictions/{dataset}/{variant}/{model}.parquet",
    params:
        # Only settings that change the numbers are params (a change re-runs the job); batch size,
        # workers and threads are read from config by the script.
        model=lambda wc: config["models"][wc.model],
        dataset=lambda wc: config["datasets"][wc.dataset],
        scales=config["scales"],
        precision=config["inference"]["precision"],
        store_top5=config["inference"]["store_top5"],
    threads: workflow.cores
    resources:
        gpu=GPU_PER_JOB,
    log:
        "logs/predictions/{dataset}/{variant}/{model}.log",
    script:
        "../scripts/predict.py"
