# Stage 4b: objects per image and the Mann-Whitney U test between configured dataset pairs.


rule object_counts:
    input:
        manifest=f"{RESULTS}/datasets/{{dataset}}/manifest.parquet",
        masks=counts_masks_input,
    output:
        counts=f"{RESULTS}/stats/object_counts/{{dataset}}.parquet",
    log:
        f"{LOGS}/stats/object_counts/{{dataset}}.log",
    wildcard_constraints:
        dataset=_alternation(STATS_DATASETS),  # count_method is set for these only
    conda:
        CONDA_ENV
    params:
        method=lambda wc: CFG.datasets[wc.dataset].count_method,
    script:
        "../scripts/object_counts.py"


rule mann_whitney:
    input:
        counts=[f"{RESULTS}/stats/object_counts/{d}.parquet" for d in STATS_DATASETS],
    output:
        csv=report(f"{RESULTS}/stats/mannwhitney.csv", caption="../report/mannwhitney.rst", category="Object counts"),
        png=report(
            f"{RESULTS}/stats/object_counts.png", caption="../report/object_counts.rst", category="Object counts"
        ),
    log:
        f"{LOGS}/stats/mannwhitney.log",
    conda:
        CONDA_ENV
    params:
        datasets=STATS_DATASETS,
        pairs=[list(pair) for pair in CFG.stats.pairs],
    script:
        "../scripts/mann_whitney.py"
