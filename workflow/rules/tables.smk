# Stage 5: tables.


rule table_a8:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report(f"{RESULTS}/table_a8.csv", caption="../report/table_a8.rst", category="Tables"),
        md=f"{RESULTS}/table_a8.md",
    log:
        f"{LOGS}/tables/table_a8.log",
    conda:
        CONDA_ENV
    params:
        # the resolved arch.tag beside the config's name (timm's resnet50.a1_in1k, torchvision's weight enums)
        architectures={m: CFG.models[m].arch_tag for m in MODELS},
        # a limited run's title says so
        limit=CFG.limit,
    script:
        "../scripts/table_a8.py"


rule table_1:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report(f"{RESULTS}/table_1.csv", caption="../report/table_1.rst", category="Tables"),
        md=f"{RESULTS}/table_1.md",
    log:
        f"{LOGS}/tables/table_1.log",
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_1.py"


rule table_zoom_groups:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report(f"{RESULTS}/table_zoom_groups.csv", caption="../report/table_zoom_groups.rst", category="Tables"),
        md=f"{RESULTS}/table_zoom_groups.md",
    log:
        f"{LOGS}/tables/table_zoom_groups.log",
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_zoom_groups.py"


rule table_aggregation:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report(f"{RESULTS}/table_aggregation.csv", caption="../report/table_aggregation.rst", category="Tables"),
        md=f"{RESULTS}/table_aggregation.md",
    log:
        f"{LOGS}/tables/table_aggregation.log",
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_aggregation.py"


rule table_imagenet_hard:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, label_set) in SCORED.items()
            if d in HARD_DATASETS and label_set == "in" and "original" in variants(d)
        ],
    output:
        csv=report(f"{RESULTS}/table_imagenet_hard.csv", caption="../report/table_imagenet_hard.rst", category="Tables"),
        md=f"{RESULTS}/table_imagenet_hard.md",
    log:
        f"{LOGS}/tables/table_imagenet_hard.log",
    conda:
        CONDA_ENV
    params:
        models={m: CFG.models[m].entry() for m in MODELS},
    script:
        "../scripts/table_imagenet_hard.py"


# The study's own leaderboard (zoomeval.report.leaderboard; `zoomeval leaderboard DIR...` merges several studies).
rule leaderboard:
    input:
        metrics=[
            f"{RESULTS}/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=f"{RESULTS}/leaderboard.csv",
        md=f"{RESULTS}/leaderboard.md",
        html=f"{RESULTS}/leaderboard.html",
    log:
        f"{LOGS}/tables/leaderboard.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/leaderboard.py"
