# Stage 5c: the per-image browser (results/browser/index.html), a static site built from the manifests, the
# correctness matrices, the greedy covers and the prediction files (see zoomeval.report.browser_data).


# One thumbnail per sampled image of a dataset, shared by its label sets.
rule browser_thumbnails:
    input:
        manifest=f"{RESULTS}/datasets/{{dataset}}/manifest.parquet",
    output:
        directory(f"{RESULTS}/browser/thumbnails/{{dataset}}"),
    log:
        f"{LOGS}/browser/thumbnails/{{dataset}}.log",
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
        matrices=original_analysis("correct.npz"),
        covers=original_analysis("cover.json"),
        labels=labels_input,
    output:
        directory(f"{RESULTS}/browser/crops/{{scored}}"),
    log:
        f"{LOGS}/browser/crops/{{scored}}.log",
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
        covers=original_analysis("cover.json"),
        predictions=lambda wc: [f"{RESULTS}/predictions/{SCORED[wc.scored][0]}/original/{m}.parquet" for m in MODELS],
        labels=labels_input,
    output:
        directory(f"{RESULTS}/browser/data/{{scored}}"),
    log:
        f"{LOGS}/browser/data/{{scored}}.log",
    wildcard_constraints:
        scored=_alternation(BROWSED),
    conda:
        CONDA_ENV
    params:
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
        data=[f"{RESULTS}/browser/data/{s}" for s in BROWSED],
        thumbnails=[f"{RESULTS}/browser/thumbnails/{d}" for d in dict.fromkeys(SCORED[s][0] for s in BROWSED)],
        crops=[f"{RESULTS}/browser/crops/{s}" for s in BROWSED],
    output:
        html=f"{RESULTS}/browser/index.html",
        assets=directory(f"{RESULTS}/browser/assets"),
        catalogue=f"{RESULTS}/browser/catalogue.js",
    log:
        f"{LOGS}/browser/site.log",
    conda:
        CONDA_ENV
    params:
        datasets=[{"name": s, "dataset": SCORED[s][0], "label_set": SCORED[s][1]} for s in BROWSED],
    script:
        "../scripts/browser_site.py"
