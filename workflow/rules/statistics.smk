# Stage 4b: objects per image and the Mann-Whitney U test between configured dataset pairs.


rule object_counts:
    input:
        manifest=LAYOUT.path("manifest"),
        masks=counts_masks_input,
    output:
        counts=LAYOUT.path("object_counts"),
    log:
        LAYOUT.log("object_counts"),
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
        counts=[LAYOUT.path("object_counts", dataset=d) for d in STATS_DATASETS],
    output:
        csv=report(LAYOUT.path("mann_whitney"), caption="../report/mannwhitney.rst", category="Object counts"),
        png=report(LAYOUT.path("object_counts_figure"), caption="../report/object_counts.rst", category="Object counts"),
    log:
        LAYOUT.log("mann_whitney"),
    conda:
        CONDA_ENV
    params:
        datasets=STATS_DATASETS,
        pairs=[list(pair) for pair in CFG.stats.pairs],
    script:
        "../scripts/mann_whitney.py"
