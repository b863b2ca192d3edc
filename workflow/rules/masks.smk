# Stage 2: foreground masks (boxes or Segment Anything), from which inference derives FGSet (object only)
# and BGSet (background only), and a contact sheet per mask file to check them by eye.


rule box_masks:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
    output:
        masks="results/masks/{dataset}/bbox.parquet",
    log:
        "logs/masks/{dataset}/bbox.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/box_masks.py"


rule sam_masks:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        checkpoint=sam_checkpoint_input,
    output:
        masks="results/masks/{dataset}/{method}.parquet",
    log:
        "logs/masks/{dataset}/{method}.log",
    wildcard_constraints:
        method="sam_box|sam_auto",
    conda:
        CONDA_ENV
    resources:
        gpu=SAM_GPU,
    params:
        sam=sam_params,
    script:
        "../scripts/sam_masks.py"


rule contact_sheet:
    input:
        manifest="results/datasets/{dataset}/manifest.parquet",
        masks="results/masks/{dataset}/{method}.parquet",
    output:
        png=report(
            "results/masks/{dataset}/{method}_contact_sheet.png",
            caption="../report/contact_sheet.rst",
            category="Masks",
            labels={"dataset": "{dataset}", "method": "{method}"},
        ),
    log:
        "logs/masks/{dataset}/{method}_contact_sheet.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/contact_sheet.py"
