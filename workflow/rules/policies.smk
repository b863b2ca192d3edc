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
    s: [f"{RESULTS}/policies/{s}/{v}/{m}.json" for v in variants(d) for m in MODELS]
    + [
        f"{RESULTS}/policies/transfer/{source}/{s}/{v}/{m}.json"
        for source, target, v in POLICY_TRANSFERS
        if target == s
        for m in MODELS
    ]
    for s, (d, _) in SCORED.items()
}
POLICY_OUTPUTS = [f"{RESULTS}/table_zoom_policies.csv", f"{RESULTS}/table_zoom_policies.md"] + [
    f"{RESULTS}/figures/{s}/zoom_policies.png" for s in SCORED
]


rule zoom_policies:
    input:
        matrix=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/correct.npz",
        metrics=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/metrics.json",
        predictions=lambda wc: f"{RESULTS}/predictions/{SCORED[wc.scored][0]}/{wc.variant}/{wc.model}.parquet",
    output:
        f"{RESULTS}/policies/{{scored}}/{{variant}}/{{model}}.json",
    log:
        f"{LOGS}/policies/{{scored}}/{{variant}}/{{model}}.log",
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
        source_matrix=f"{RESULTS}/analysis/{{source}}/{{variant}}/{{model}}/correct.npz",
        source_predictions=lambda wc: f"{RESULTS}/predictions/{SCORED[wc.source][0]}/{wc.variant}/{wc.model}.parquet",
        matrix=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/correct.npz",
        metrics=f"{RESULTS}/analysis/{{scored}}/{{variant}}/{{model}}/metrics.json",
        predictions=lambda wc: f"{RESULTS}/predictions/{SCORED[wc.scored][0]}/{wc.variant}/{wc.model}.parquet",
    output:
        f"{RESULTS}/policies/transfer/{{source}}/{{scored}}/{{variant}}/{{model}}.json",
    log:
        f"{LOGS}/policies/transfer/{{source}}/{{scored}}/{{variant}}/{{model}}.log",
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
        tta=f"{RESULTS}/table_tta.csv" if CFG.policies.memo else [],
    output:
        csv=report(f"{RESULTS}/table_zoom_policies.csv", caption="../report/table_zoom_policies.rst", category="Tables"),
        md=f"{RESULTS}/table_zoom_policies.md",
    log:
        f"{LOGS}/tables/table_zoom_policies.log",
    conda:
        CONDA_ENV
    params:
        memo_passes=CFG.tta.views * CFG.tta.steps + 1,
    script:
        "../scripts/table_zoom_policies.py"


rule zoom_policy_figure:
    input:
        documents=lambda wc: POLICY_DOCUMENTS[wc.scored],
        tta=f"{RESULTS}/table_tta.csv" if CFG.policies.memo else [],
    output:
        report(
            f"{RESULTS}/figures/{{scored}}/zoom_policies.png",
            caption="../report/zoom_policies.rst",
            category="Figures",
            subcategory="{scored}",
            labels={"model": "all", "variant": "all", "figure": "zoom policies"},
        ),
    log:
        f"{LOGS}/figures/{{scored}}.zoom_policies.log",
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        memo_passes=CFG.tta.views * CFG.tta.steps + 1,
    script:
        "../scripts/zoom_policy_figure.py"
