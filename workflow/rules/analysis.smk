# Stage 4: 1-crop accuracy, upper bounds and the greedy minimum set cover per prediction file.


# {scored} is a dataset name, suffixed _<label set> for its other label sets (e.g. _real, _multilabel).
rule analyze:
    input:
        predictions=of_scored("predictions"),
        aggregates=of_scored("aggregates"),
        manifest=of_scored("manifest"),
        bad_images=bad_images_input,
        labels=labels_input,
        standard=lambda wc: of_scored("standard")(wc) if wc.variant == "original" else [],
    output:
        metrics=LAYOUT.path("metrics"),
        cover=LAYOUT.path("cover"),
        matrix=LAYOUT.path("correct"),
    log:
        LAYOUT.log("analyze"),
    wildcard_constraints:
        scored=_alternation(SCORED),
    conda:
        CONDA_ENV
    params:
        top_k=CFG.top_k,
        node_limit=CFG.cover_node_limit,
        time_limit=CFG.cover_time_limit,
        label_set=lambda wc: SCORED[wc.scored][1],
    script:
        "../scripts/analyze.py"
