# Stage 1: one manifest per dataset (labels, sizes, boxes), from its fetched or local inputs.


rule generated_dataset:
    input:
        unpack(dataset_inputs),
    output:
        manifest=LAYOUT.path("manifest"),
        images=directory(LAYOUT.path("images")),
        bad_images=LAYOUT.path("bad_images"),
    log:
        LAYOUT.log("dataset"),
    wildcard_constraints:
        dataset=_alternation(WRITTEN_DATASETS),
    conda:
        CONDA_ENV
    threads: 4
    params:
        entry=lambda wc: CFG.datasets[wc.dataset].source(),
        on_bad_image=CFG.on_bad_image,
        # images that would exceed the pixel budget at the largest scale are bad images
        max_scale=max(CFG.scales),
        max_resized_pixels=CFG.max_resized_pixels,
    script:
        "../scripts/build_dataset.py"


rule dataset_manifest:
    input:
        unpack(dataset_inputs),
    output:
        manifest=LAYOUT.path("manifest"),
        bad_images=LAYOUT.path("bad_images"),
    log:
        LAYOUT.log("dataset"),
    wildcard_constraints:
        dataset=_alternation([d for d in DATASETS if d not in WRITTEN_DATASETS]),
    conda:
        CONDA_ENV
    threads: 4
    params:
        entry=lambda wc: CFG.datasets[wc.dataset].source(),
        on_bad_image=CFG.on_bad_image,
        # images that would exceed the pixel budget at the largest scale are bad images
        max_scale=max(CFG.scales),
        max_resized_pixels=CFG.max_resized_pixels,
    script:
        "../scripts/build_dataset.py"
