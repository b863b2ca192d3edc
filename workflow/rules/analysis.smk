# Stage 4: 1-crop accuracy, upper bounds and the greedy minimum set cover per prediction file.


rule analyze:
    input:
        predictions="results/predictions/{dataset}/{variant}/{model}.parquet",
        manifest="results/datasets/{dataset}/manifest.parquet",
    output:
        metrics="results/analysis/{dataset}/{variant}/{model}/metrics.json",
        cover="results/analysis/{dataset}/{variant}/{model}/cover.json",
    params:
        top_k=config["top_k"],
    conda:
        CONDA_ENV
    log:
        "logs/analysis/{dataset}/{variant}/{model}.log",
    script:
        "../scripts/analyze.py"
