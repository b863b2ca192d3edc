# Stage 5b: figures from the saved correctness matrices and metrics (no inference is re-run).


rule model_figures:
    input:
        matrix="results/analysis/{scored}/{variant}/{model}/correct.npz",
        cover="results/analysis/{scored}/{variant}/{model}/cover.json",
    output:
        anchors="results/figures/{scored}/{variant}/{model}/anchor_grid.png",
        scales="results/figures/{scored}/{variant}/{model}/scale_curves.png",
        top_k="results/figures/{scored}/{variant}/{model}/top_k_locations.png",
    wildcard_constraints:
        scored=_alternation(SCORED),
    params:
        top_k=config["top_k"],
    conda:
        CONDA_ENV
    log:
        "logs/figures/{scored}/{variant}/{model}.log",
    script:
        "../scripts/model_figures.py"


rule dataset_figures:
    input:
        metrics=lambda wc: [
            f"results/analysis/{wc.scored}/{v}/{m}/metrics.json" for m in MODELS for v in variants(SCORED[wc.scored][0])
        ],
    output:
        upper_bounds="results/figures/{scored}/upper_bounds.png",
        variants="results/figures/{scored}/variants.png",
    wildcard_constraints:
        scored=_alternation(SCORED),
    params:
        top_k=config["top_k"],
    conda:
        CONDA_ENV
    log:
        "logs/figures/{scored}.log",
    script:
        "../scripts/dataset_figures.py"
