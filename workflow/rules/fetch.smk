# Stage 1a: downloads and extractions, each a declared output under the resources root (config key `resources`),
# so that a failed manifest, predict or sam_masks job does not fetch again and --delete-all-output sees them.


# Under a cluster executor, downloads run where Snakemake runs (a login node has network; compute nodes often
# have none). Extraction, which can take an hour and 184 GB, runs as a job like the others.
localrules:
    fetch_url,
    fetch_hf,
    fetch_weights,


rule fetch_url:
    output:
        f"{R}/{{download}}",
    log:
        LAYOUT.log("fetch_url"),
    wildcard_constraints:
        download=_alternation(URLS),
    conda:
        CONDA_ENV
    params:
        input=lambda wc: (URLS[wc.download].owner, URLS[wc.download].name),
        spec=lambda wc: URLS[wc.download].spec.to_config(),
    script:
        "../scripts/fetch_input.py"


rule fetch_hf:
    output:
        directory(f"{R}/{{snapshot}}"),
    log:
        LAYOUT.log("fetch_hf"),
    wildcard_constraints:
        snapshot=_alternation(SNAPSHOTS),
    conda:
        CONDA_ENV
    params:
        input=lambda wc: (SNAPSHOTS[wc.snapshot].owner, SNAPSHOTS[wc.snapshot].name),
        spec=lambda wc: SNAPSHOTS[wc.snapshot].spec.to_config(),
    script:
        "../scripts/fetch_input.py"


rule extract_archive:
    input:
        archive=lambda wc: EXTRACTIONS[wc.extracted].archive,
    output:
        directory(f"{R}/{{extracted}}"),
    log:
        LAYOUT.log("extract_archive"),
    wildcard_constraints:
        extracted=_alternation(EXTRACTIONS),
    conda:
        CONDA_ENV
    params:
        input=lambda wc: (EXTRACTIONS[wc.extracted].owner, EXTRACTIONS[wc.extracted].name),
        spec=lambda wc: EXTRACTIONS[wc.extracted].spec.to_config(),
        password=lambda wc: EXTRACTIONS[wc.extracted].password,
    script:
        "../scripts/extract_archive.py"


rule fetch_weights:
    input:
        checkpoint=checkpoint_input,
    output:
        directory(f"{R}/{{weights}}"),
    log:
        LAYOUT.log("fetch_weights"),
    wildcard_constraints:
        weights=_alternation(WEIGHTS),
    conda:
        CONDA_ENV
    params:
        model=lambda wc: WEIGHTS[wc.weights].name,
    script:
        "../scripts/fetch_weights.py"
