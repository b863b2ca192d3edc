# Stage 1: one manifest per dataset (labels, sizes, boxes).


rule generated_dataset:
    output:
        manifest="results/datasets/{dataset}/manifest.parquet",
        images=directory("results/datasets/{dataset}/images"),
    wildcard_constraints:
        dataset=_alternation(GENERATED_DATASETS),
    params:
        entry=lambda wc: dataset_source(wc.dataset),
    conda:
        CONDA_ENV
    log:
        "logs/datasets/{dataset}.log",
    script:
        "../scripts/build_dataset.py"


rule dataset_manifest:
    output:
        manifest="results/datasets/{dataset}/manifest.parquet",
    wildcard_constraints:
        dataset=_alternation([d for d in DATASETS if d not in GENERATED_DATASETS]),
    params:
        entry=lambda wc: dataset_source(wc.dataset),
    conda:
        CONDA_ENV
    log:
        "logs/datasets/{dataset}.log",
    script:
        "../scripts/build_dataset.py"
