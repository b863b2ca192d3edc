# Shankar et al.'s multi-label annotations of ImageNet val and ImageNet-V2 (human_accuracy_v3.0.0.json, config key
# `multilabel`; a URL is a fetch_url job): matched to the images of each dataset scored with the multilabel or
# imagenet_m label set, and the multi-label table (zoomeval.datasets.multilabel, zoomeval.analysis.multilabel_scores).
ANNOTATIONS = INPUTS.get(("labels", "multilabel"))
MULTILABEL_DATASETS = list(dict.fromkeys(d for d, ls in SCORED.values() if LABEL_SETS[ls].labels_file))
# the table has a row per model and dataset scored with the multilabel label set, from its original images
MULTILABEL_TABLE = [
    {
        "dataset": d,
        "model": m,
        "adapter": CFG.datasets[d].adapter,
        "predictions": LAYOUT.path("predictions", dataset=d, variant="original", model=m),
        "manifest": LAYOUT.path("manifest", dataset=d),
        "labels": LAYOUT.path("labels", dataset=d, labels_file="multilabel.parquet"),
        "metrics": LAYOUT.path("metrics", scored=scored_name(d, "multilabel"), variant="original", model=m),
    }
    for m in MODELS
    for d in DATASETS
    if "multilabel" in CFG.datasets[d].label_sets
]


rule multilabel_labels:
    input:
        annotations=ANNOTATIONS.fetched or ANNOTATIONS.spec.path if ANNOTATIONS else [],
        manifest=LAYOUT.path("manifest"),
    output:
        LAYOUT.path("labels", labels_file="multilabel.parquet"),
    log:
        LAYOUT.log("multilabel_labels"),
    wildcard_constraints:
        dataset=_alternation(MULTILABEL_DATASETS),
    conda:
        CONDA_ENV
    params:
        # a changed source (URL, path, sha256) matches the annotations again
        source=CFG.multilabel.to_config(),
    script:
        "../scripts/multilabel_labels.py"


rule table_multilabel:
    input:
        files=[row[key] for row in MULTILABEL_TABLE for key in ("predictions", "manifest", "labels", "metrics")],
    output:
        csv=report(
            LAYOUT.path("table_multilabel", ext="csv"), caption="../report/table_multilabel.rst", category="Tables"
        ),
        md=LAYOUT.path("table_multilabel", ext="md"),
    log:
        LAYOUT.log("table", table="table_multilabel"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        rows=MULTILABEL_TABLE,
    script:
        "../scripts/table_multilabel.py"
