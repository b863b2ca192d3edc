# Stage 5: tables.


rule table_a8:
    input:
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant=v, model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report(LAYOUT.path("table_a8", ext="csv"), caption="../report/table_a8.rst", category="Tables"),
        md=LAYOUT.path("table_a8", ext="md"),
    log:
        LAYOUT.log("table", table="table_a8"),
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
            LAYOUT.path("metrics", scored=scored, variant="original", model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report(LAYOUT.path("table_1", ext="csv"), caption="../report/table_1.rst", category="Tables"),
        md=LAYOUT.path("table_1", ext="md"),
    log:
        LAYOUT.log("table", table="table_1"),
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_1.py"


rule table_zoom_groups:
    input:
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant=v, model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=report(
            LAYOUT.path("table_zoom_groups", ext="csv"), caption="../report/table_zoom_groups.rst", category="Tables"
        ),
        md=LAYOUT.path("table_zoom_groups", ext="md"),
    log:
        LAYOUT.log("table", table="table_zoom_groups"),
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_zoom_groups.py"


# Where zoom helps (zoomeval.analysis.where_zoom_helps): the original images' 1-crop, acc_max and best policy (its
# held-out choices, written by the policies job) by object size and centre distance, for the scored datasets with
# boxes (BOXED; `all` requests it only where there is one).
rule table_where_zoom_helps:
    input:
        manifests=[LAYOUT.path("manifest", dataset=SCORED[s][0]) for s in BOXED for m in MODELS],
        matrices=[LAYOUT.path("correct", scored=s, variant="original", model=m) for s in BOXED for m in MODELS],
        metrics=[LAYOUT.path("metrics", scored=s, variant="original", model=m) for s in BOXED for m in MODELS],
        choices=[LAYOUT.path("policy_choices", scored=s, variant="original", model=m) for s in BOXED for m in MODELS],
    output:
        csv=report(
            LAYOUT.path("table_where_zoom_helps", ext="csv"),
            caption="../report/table_where_zoom_helps.rst",
            category="Tables",
        ),
        md=LAYOUT.path("table_where_zoom_helps", ext="md"),
    log:
        LAYOUT.log("table", table="table_where_zoom_helps"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        cells=[[s, m] for s in BOXED for m in MODELS],
        budget=CFG.where_zoom_helps.budget,
    script:
        "../scripts/table_where_zoom_helps.py"


rule table_aggregation:
    input:
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant="original", model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            if "original" in variants(d)
        ],
    output:
        csv=report(
            LAYOUT.path("table_aggregation", ext="csv"), caption="../report/table_aggregation.rst", category="Tables"
        ),
        md=LAYOUT.path("table_aggregation", ext="md"),
    log:
        LAYOUT.log("table", table="table_aggregation"),
    conda:
        CONDA_ENV
    params:
        limit=CFG.limit,
    script:
        "../scripts/table_aggregation.py"


rule table_imagenet_hard:
    input:
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant="original", model=m)
            for m in MODELS
            for scored, (d, label_set) in SCORED.items()
            if d in HARD_DATASETS and label_set == "in" and "original" in variants(d)
        ],
    output:
        csv=report(
            LAYOUT.path("table_imagenet_hard", ext="csv"),
            caption="../report/table_imagenet_hard.rst",
            category="Tables",
        ),
        md=LAYOUT.path("table_imagenet_hard", ext="md"),
    log:
        LAYOUT.log("table", table="table_imagenet_hard"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        models={m: CFG.models[m].entry() for m in MODELS},
    script:
        "../scripts/table_imagenet_hard.py"


STUDY_INDEX = LAYOUT.path("study_index")


# The study index, written last: every finished result with its sha256 and comparability key (report/study_index.py).
rule study_index:
    input:
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant=v, model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        index=STUDY_INDEX,
    log:
        LAYOUT.log("table", table="study_index"),
    conda:
        CONDA_ENV
    script:
        "../scripts/study_index.py"


# The study's own leaderboard (zoomeval.publish.leaderboard; `zoomeval leaderboard DIR...` merges several studies),
# read through the study index as the command reads any study.
rule leaderboard:
    input:
        index=STUDY_INDEX,
        metrics=[
            LAYOUT.path("metrics", scored=scored, variant=v, model=m)
            for m in MODELS
            for scored, (d, _) in SCORED.items()
            for v in variants(d)
        ],
    output:
        csv=LAYOUT.path("leaderboard", ext="csv"),
        md=LAYOUT.path("leaderboard", ext="md"),
        html=LAYOUT.path("leaderboard", ext="html"),
    log:
        LAYOUT.log("table", table="leaderboard"),
    conda:
        CONDA_ENV
    params:
        # the rows' datasets and prediction files are read under the run's results root (a limited run's own)
        limit=CFG.limit,
    script:
        "../scripts/leaderboard.py"
