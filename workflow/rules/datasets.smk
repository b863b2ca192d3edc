# Stage 1: one manifest per dataset (labels, sizes, boxes).


rule generated_dataset:
    output:
        manifest="results/datasets/{dataset}/manifest.parquet",
        images=directory("results/datasets/{dataset}/images"),
        bad_images="results/datasets/{dataset}/bad_images.csv",
    log:
        "logs/datasets/{dataset}.log",
    wildcard_constraints:
        dataset=_alternation(GENERATED_DATASETS),
    conda:
        CONDA_ENV
    threads: 4
    params:
        entry=lambda wc: dataset_source(wc.dataset),
        on_bad_image=config["on_bad_image"],
        # images that would exceed the pixel budget at the largest scale are bad images
        max_scale=max(config["scales"]),
        max_resized_pixels=config["max_resized_pixels"],
    script:
        "../scripts/build_dataset.py"


rule dataset_manifest:
    output:
        manifest="results/datasets/{dataset}/manifest.parquet",
        bad_images="results/datasets/{dataset}/bad_images.csv",
    log:
        "logs/datasets/{dataset}.log",
    wildcard_constraints:
        dataset=_alternation([d for d in DATASETS if d not in GENERATED_DATASETS]),
    conda:
        CONDA_ENV
    threads: 4
    params:
        entry=lambda wc: dataset_source(wc.dataset),
        on_bad_image=config["on_bad_image"],
        # images that would exceed the pixel budget at the largest scale are bad images
        max_scale=max(config["scales"]),
        max_resized_pixels=config["max_resized_pixels"],
    script:
        "../scripts/build_dataset.py"
