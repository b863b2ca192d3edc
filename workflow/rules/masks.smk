# Stage 2: foreground masks (boxes or Segment Anything), from which inference derives FGSet (object only)
# and BGSet (background only), and a contact sheet per mask file to check them by eye.


rule box_masks:
    input:
        manifest=f"{RESULTS}/datasets/{{dataset}}/manifest.parquet",
    output:
        masks=f"{RESULTS}/masks/{{dataset}}/bbox.parquet",
    log:
        f"{LOGS}/masks/{{dataset}}/bbox.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/box_masks.py"


rule sam_masks:
    input:
        manifest=f"{RESULTS}/datasets/{{dataset}}/manifest.parquet",
        checkpoint=sam_checkpoint_input,
    output:
        masks=f"{RESULTS}/masks/{{dataset}}/{{method}}.parquet",
    log:
        f"{LOGS}/masks/{{dataset}}/{{method}}.log",
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
        manifest=f"{RESULTS}/datasets/{{dataset}}/manifest.parquet",
        masks=f"{RESULTS}/masks/{{dataset}}/{{method}}.parquet",
    output:
        png=report(
            f"{RESULTS}/masks/{{dataset}}/{{method}}_contact_sheet.png",
            caption="../report/contact_sheet.rst",
            category="Masks",
            labels={"dataset": "{dataset}", "method": "{method}"},
        ),
    log:
        f"{LOGS}/masks/{{dataset}}/{{method}}_contact_sheet.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/contact_sheet.py"
