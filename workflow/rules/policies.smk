# Stage 4b: label-free zoom policies over the saved correctness matrices and prediction columns (no inference is
# re-run): cross-validated per scored prediction file, transferred between the pairs of policies.transfer, then
# results/table_zoom_policies.csv and a figure per scored dataset (zoomeval.analysis.policies, .policy_eval).
from dataclasses import asdict

# The settings that change a policies job's numbers (the transfer pairs only decide which jobs there are).
POLICY_SETTINGS = {k: v for k, v in asdict(CFG.policies).items() if k not in ("transfer", "memo")}
# (source, target, variant) of each transfer job: the variants the two scored datasets share.
POLICY_TRANSFERS = [
    (source, target, v)
    for source, target in CFG.policies.transfer
    for v in variants(SCORED[target][0])
    if v in variants(SCORED[source][0])
]


# Every policies document scored on each scored dataset: cross-validated, then transferred into it.
POLICY_DOCUMENTS = {
    s: [LAYOUT.path("policies", scored=s, variant=v, model=m) for v in variants(d) for m in MODELS]
    + [
        LAYOUT.path("policy_transfer", source=source, scored=s, variant=v, model=m)
        for source, target, v in POLICY_TRANSFERS
        if target == s
        for m in MODELS
    ]
    for s, (d, _) in SCORED.items()
}
POLICY_OUTPUTS = [LAYOUT.path("table_zoom_policies", ext=ext) for ext in ("csv", "md")] + [
    LAYOUT.path("zoom_policies_figure", scored=s) for s in SCORED
]


rule zoom_policies:
    input:
        matrix=LAYOUT.path("correct"),
        metrics=LAYOUT.path("metrics"),
        predictions=of_scored("predictions"),
    output:
        LAYOUT.path("policies"),
        choices=LAYOUT.path("policy_choices"),
    log:
        LAYOUT.log("zoom_policies"),
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        settings=POLICY_SETTINGS,
    script:
        "../scripts/zoom_policies.py"


rule zoom_policies_transfer:
    input:
        source_matrix=LAYOUT.path("correct", scored="{source}"),
        source_predictions=of_scored("predictions", scored="source"),
        matrix=LAYOUT.path("correct"),
        metrics=LAYOUT.path("metrics"),
        predictions=of_scored("predictions"),
    output:
        LAYOUT.path("policy_transfer"),
    log:
        LAYOUT.log("zoom_policies_transfer"),
    wildcard_constraints:
        source=_alternation(SCORED),
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        settings=POLICY_SETTINGS,
    script:
        "../scripts/zoom_policies.py"


rule table_zoom_policies:
    input:
        documents=[path for paths in POLICY_DOCUMENTS.values() for path in paths],
        tta=LAYOUT.path("table_tta", ext="csv") if CFG.policies.memo else [],
    output:
        csv=report(
            LAYOUT.path("table_zoom_policies", ext="csv"),
            caption="../report/table_zoom_policies.rst",
            category="Tables",
        ),
        md=LAYOUT.path("table_zoom_policies", ext="md"),
    log:
        LAYOUT.log("table", table="table_zoom_policies"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        memo_passes=CFG.tta.views * CFG.tta.steps + 1,
    script:
        "../scripts/table_zoom_policies.py"


rule zoom_policy_figure:
    input:
        documents=lambda wc: POLICY_DOCUMENTS[wc.scored],
        tta=LAYOUT.path("table_tta", ext="csv") if CFG.policies.memo else [],
    output:
        report(
            LAYOUT.path("zoom_policies_figure"),
            caption="../report/zoom_policies.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "all", "figure": "zoom policies"},
        ),
    log:
        LAYOUT.log("zoom_policy_figure"),
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        memo_passes=CFG.tta.views * CFG.tta.steps + 1,
    script:
        "../scripts/zoom_policy_figure.py"
