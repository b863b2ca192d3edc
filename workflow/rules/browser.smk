# Stage 5c: the per-image browser (results/browser/index.html), a static site built from the manifests, the
# correctness matrices, the greedy covers and the prediction files (see zoomeval.browser.data).


# One thumbnail per sampled image of a dataset, shared by its label sets.
rule browser_thumbnails:
    input:
        manifest=LAYOUT.path("manifest"),
    output:
        directory(LAYOUT.path("browser_thumbnails")),
    log:
        LAYOUT.log("browser_thumbnails"),
    conda:
        CONDA_ENV
    threads: 4
    params:
        max_images=CFG.browser.max_images,
        size=CFG.browser.thumbnail_size,
    script:
        "../scripts/browser_thumbnails.py"


# Per scored dataset and model, the crop of the first greedy pick that solves each sampled image.
rule browser_crops:
    input:
        manifest=browser_manifest,
        matrices=original_analysis("correct"),
        covers=original_analysis("cover"),
        labels=labels_input,
    output:
        directory(LAYOUT.path("browser_crops")),
    log:
        LAYOUT.log("browser_crops"),
    wildcard_constraints:
        scored=_alternation(BROWSED),
    conda:
        CONDA_ENV
    threads: 4
    params:
        models=MODELS,
        label_set=lambda wc: SCORED[wc.scored][1],
        max_images=CFG.browser.max_images,
        size=CFG.browser.thumbnail_size,
    script:
        "../scripts/browser_crops.py"


rule browser_data:
    input:
        manifest=browser_manifest,
        bad_images=bad_images_input,
        matrices=browser_matrices,
        covers=original_analysis("cover"),
        predictions=lambda wc: [
            LAYOUT.path("predictions", dataset=SCORED[wc.scored][0], variant="original", model=m) for m in MODELS
        ],
        labels=labels_input,
    output:
        directory(LAYOUT.path("browser_data")),
    log:
        LAYOUT.log("browser_data"),
    wildcard_constraints:
        scored=_alternation(BROWSED),
    conda:
        CONDA_ENV
    params:
        # the left-out column names the bad images' files under the run's results root (a limited run's own)
        limit=CFG.limit,
        models=MODELS,
        variants=lambda wc: variants(SCORED[wc.scored][0]),
        dataset=lambda wc: SCORED[wc.scored][0],
        label_set=lambda wc: SCORED[wc.scored][1],
        max_images=CFG.browser.max_images,
        page_size=CFG.browser.page_size,
        predictions_shown=CFG.browser.predictions_shown,
    script:
        "../scripts/browser_data.py"


rule browser:
    input:
        data=[LAYOUT.path("browser_data", scored=s) for s in BROWSED],
        thumbnails=[LAYOUT.path("browser_thumbnails", dataset=d) for d in dict.fromkeys(SCORED[s][0] for s in BROWSED)],
        crops=[LAYOUT.path("browser_crops", scored=s) for s in BROWSED],
    output:
        html=LAYOUT.path("browser"),
        assets=directory(LAYOUT.path("browser_assets")),
        catalogue=LAYOUT.path("browser_catalogue"),
    log:
        LAYOUT.log("browser"),
    conda:
        CONDA_ENV
    params:
        datasets=[{"name": s, "dataset": SCORED[s][0], "label_set": SCORED[s][1]} for s in BROWSED],
    script:
        "../scripts/browser_site.py"
