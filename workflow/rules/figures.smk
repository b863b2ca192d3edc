# Stage 5b: figures from the saved correctness matrices and metrics (no inference is re-run).


rule model_figures:
    input:
        matrix=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/correct.npz",
        cover=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/cover.json",
    output:
        anchors=report(
            f"{RESULTS}/figures/{{scored}}/{{variant}}/{{model}}/anchor_grid.png",
            caption="../report/anchor_grid.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "anchor grid"},
        ),
        scales=report(
            f"{RESULTS}/figures/{{scored}}/{{variant}}/{{model}}/scale_curves.png",
            caption="../report/scale_curves.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "scale curves"},
        ),
        top_k=report(
            f"{RESULTS}/figures/{{scored}}/{{variant}}/{{model}}/top_k_locations.png",
            caption="../report/top_k_locations.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "top-k locations"},
        ),
        centre_bias=report(
            f"{RESULTS}/figures/{{scored}}/{{variant}}/{{model}}/centre_bias.png",
            caption="../report/centre_bias.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "{model}", "variant": "{variant}", "figure": "centre bias"},
        ),
    log:
        f"{LOGS}/figures/{{scored}}/{{variant}}/{{model}}.log",
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
            f"{RESULTS}/analysis/{wc.scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for v in variants(SCORED[wc.scored][0])
        ],
    output:
        upper_bounds=report(
            f"{RESULTS}/figures/{{scored}}/upper_bounds.png",
            caption="../report/upper_bounds.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "original", "figure": "1 -> top-k -> all"},
        ),
        variants=report(
            f"{RESULTS}/figures/{{scored}}/variants.png",
            caption="../report/variants.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "all", "figure": "variants"},
        ),
    log:
        f"{LOGS}/figures/{{scored}}.log",
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    script:
        "../scripts/dataset_figures.py"
