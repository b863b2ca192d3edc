# Stage 5d: the hard sets, images that no configured model solves under any transform (original images), in
# ImageNet-Hard's Hugging Face layout, and their composition by origin (see zoomeval.browser.hard_set).


rule hard_set:
    input:
        manifest=browser_manifest,
        bad_images=bad_images_input,
        matrices=original_analysis("correct"),
        labels=labels_input,
    output:
        LAYOUT.path("hard"),
    log:
        LAYOUT.log("hard_set"),
    wildcard_constraints:
        scored=_alternation(BROWSED),
    conda:
        CONDA_ENV
    params:
        models=MODELS,
        dataset=lambda wc: SCORED[wc.scored][0],
        label_set=lambda wc: SCORED[wc.scored][1],
    script:
        "../scripts/hard_set.py"


rule hard_summary:
    input:
        hard_sets=[LAYOUT.path("hard", scored=s) for s in BROWSED],
    output:
        csv=report(LAYOUT.path("hard_summary", ext="csv"), caption="../report/hard_set.rst", category="Hard set"),
        md=LAYOUT.path("hard_summary", ext="md"),
    log:
        LAYOUT.log("hard_summary"),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
    script:
        "../scripts/hard_summary.py"
