# Stage 5b: figures from the saved correctness matrices and metrics (no inference is re-run).


rule model_figures:
    input:
        matrix=LAYOUT.path("correct"),
        cover=LAYOUT.path("cover"),
    output:
        anchors=report(
            LAYOUT.path("anchor_grid"),
            caption="../report/anchor_grid.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "anchor grid"},
        ),
        scales=report(
            LAYOUT.path("scale_curves"),
            caption="../report/scale_curves.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "scale curves"},
        ),
        top_k=report(
            LAYOUT.path("top_k_locations"),
            caption="../report/top_k_locations.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "top-k locations"},
        ),
        centre_bias=report(
            LAYOUT.path("centre_bias"),
            caption="../report/centre_bias.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "centre bias"},
        ),
    log:
        LAYOUT.log("model_figures"),
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        top_k=CFG.top_k,
    script:
        "../scripts/model_figures.py"


rule dataset_figures:
    input:
        metrics=lambda wc: [
            LAYOUT.path("metrics", scored=wc.scored, variant=v, model=m)
            for m in MODELS
            for v in variants(SCORED[wc.scored][0])
        ],
    output:
        upper_bounds=report(
            LAYOUT.path("upper_bounds"),
            caption="../report/upper_bounds.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "original", "figure": "1 -> top-k -> all"},
        ),
        variants=report(
            LAYOUT.path("variants_figure"),
            caption="../report/variants.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "all", "figure": "variants"},
        ),
    log:
        LAYOUT.log("dataset_figures"),
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    script:
        "../scripts/dataset_figures.py"


# Where zoom helps (zoomeval.report.where_zoom_helps): a scored dataset with boxes, its original images' 1-crop,
# acc_max and best policy per model by object size and centre distance (BOXED; `all` requests it only for those).
rule where_zoom_helps_figure:
    input:
        manifest=of_scored("manifest"),
        matrices=lambda wc: [LAYOUT.path("correct", scored=wc.scored, variant="original", model=m) for m in MODELS],
        metrics=lambda wc: [LAYOUT.path("metrics", scored=wc.scored, variant="original", model=m) for m in MODELS],
        choices=lambda wc: [
            LAYOUT.path("policy_choices", scored=wc.scored, variant="original", model=m) for m in MODELS
        ],
    output:
        report(
            LAYOUT.path("where_zoom_helps_figure"),
            caption="../report/where_zoom_helps.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "original", "figure": "where zoom helps"},
        ),
    log:
        LAYOUT.log("where_zoom_helps_figure"),
    wildcard_constraints:
        scored=_alternation(BOXED),
    conda:
        CONDA_ENV
    params:
        models=MODELS,
        budget=CFG.where_zoom_helps.budget,
    script:
        "../scripts/where_zoom_helps_figure.py"
