# Stage 2: foreground masks, from which inference derives FGSet (object only) and BGSet (background only).


rule box_masks:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
    output:
        masks="results/masks/{dataset}/bbox.parquet",
    conda:
        CONDA_ENV
    log:
        "logs/masks/{dataset}/bbox.log",
    script:
        "../scripts/box_masks.py"
