# Stage 2: foreground masks (boxes or Segment Anything), from which inference derives FGSet (object only)
# and BGSet (background only), and a contact sheet per mask file to check them by eye.


rule box_masks:
    input:
        manifest=LAYOUT.path("manifest"),
    output:
        masks=LAYOUT.path("masks", method="bbox"),
    log:
        LAYOUT.log("box_masks"),
    conda:
        CONDA_ENV
    script:
        "../scripts/box_masks.py"


rule sam_masks:
    input:
        manifest=LAYOUT.path("manifest"),
        checkpoint=sam_checkpoint_input,
    output:
        masks=LAYOUT.path("masks"),
    log:
        LAYOUT.log("sam_masks"),
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
        manifest=LAYOUT.path("manifest"),
        masks=LAYOUT.path("masks"),
    output:
        png=report(
            LAYOUT.path("contact_sheet"),
            caption="../report/contact_sheet.rst",
            category="Masks",
            labels={"dataset": "{dataset}", "method": "{method}"},
        ),
    log:
        LAYOUT.log("contact_sheet"),
    conda:
        CONDA_ENV
    script:
        "../scripts/contact_sheet.py"
