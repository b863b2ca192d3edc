# Stage 5: tables.


rule table_a8:
    input:
        metrics=[
            f"results/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report("results/table_a8.csv", caption="../report/table_a8.rst", category="Tables"),
        md="results/table_a8.md",
    log:
        "logs/tables/table_a8.log",
    conda:
        CONDA_ENV
    params:
        # the resolved arch.tag beside the config's name (timm's resnet50.a1_in1k, torchvision's weight enums)
        architectures={m: CFG.models[m].arch_tag for m in MODELS},
    script:
        "../scripts/table_a8.py"


rule table_1:
    input:
        metrics=[
            f"results/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report("results/table_1.csv", caption="../report/table_1.rst", category="Tables"),
        md="results/table_1.md",
    log:
        "logs/tables/table_1.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/table_1.py"


rule table_zoom_groups:
    input:
        metrics=[
            f"results/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report("results/table_zoom_groups.csv", caption="../report/table_zoom_groups.rst", category="Tables"),
        md="results/table_zoom_groups.md",
    log:
        "logs/tables/table_zoom_groups.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/table_zoom_groups.py"


rule table_aggregation:
    input:
        metrics=[
            f"results/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report("results/table_aggregation.csv", caption="../report/table_aggregation.rst", category="Tables"),
        md="results/table_aggregation.md",
    log:
        "logs/tables/table_aggregation.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/table_aggregation.py"


rule table_imagenet_hard:
    input:
        metrics=[
            f"results/analysis/{scored}/original/{m}/metrics.json"
            for m in MODELS
            for scored, (d, label_set) in SCORED.items()
            if d in HARD_DATASETS and label_set == "in" and "original" in variants(d)
        ],
    output:
        csv=report("results/table_imagenet_hard.csv", caption="../report/table_imagenet_hard.rst", category="Tables"),
        md="results/table_imagenet_hard.md",
    log:
        "logs/tables/table_imagenet_hard.log",
    conda:
        CONDA_ENV
    params:
        models={m: CFG.models[m].entry() for m in MODELS},
    script:
        "../scripts/table_imagenet_hard.py"


from zoomeval.core.layout import Layout

STUDY_INDEX = Layout().path("study_index")


# The study index, written last: every finished result with its sha256 and comparability key (report/study_index.py).
rule study_index:
    input:
        metrics=[
            Layout().path("metrics", scored=scored, variant=v, model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        index=STUDY_INDEX,
    log:
        "logs/tables/study_index.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/study_index.py"


# The study's own leaderboard (zoomeval.report.leaderboard; `zoomeval leaderboard DIR...` merges several studies),
# read through the study index as the command reads any study.
rule leaderboard:
    input:
        index=STUDY_INDEX,
        metrics=[
            f"results/analysis/{scored}/{v}/{m}/metrics.json"
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv="results/leaderboard.csv",
        md="results/leaderboard.md",
        html="results/leaderboard.html",
    log:
        "logs/tables/leaderboard.log",
    conda:
        CONDA_ENV
    script:
        "../scripts/leaderboard.py"
