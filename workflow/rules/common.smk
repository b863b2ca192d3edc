# The config, validated (normalisation, the JSON schema, the package's own checks) before any job starts and then
# typed: every rule reads CFG. Checks that import torchvision or timm run in the Snakefile's onstart.
import os
import re
import sys

from zoomeval.analysis.label_sets import LABEL_SETS
from zoomeval.core.cluster import refuse_placeholders
from zoomeval.core.config import scored_name
from zoomeval.core.strict_yaml import load_config_file
from zoomeval.core.devices import claims_gpu, cpu_note
from zoomeval.core.layout import OUTPUTS, run_layout
from zoomeval.datasets.inputs import local_file_sha256, plan_all
from zoomeval.datasets.registry import ADAPTERS
from zoomeval.inference.catalogue import CACHE as CATALOGUES
from zoomeval.inference.models import head_name, local_checkpoint, weights_folder
from zoomeval.inference.sources.open_clip_models import head_inputs
from zoomeval.registries import load_config
from zoomeval.report.report_check import check_built
from zoomeval.run.targets import study_tables

# Snakemake's loader keeps the last of two equal keys: the config files are read again, refusing duplicates (and
# a --configfile that is no mapping, too big or too deep, one line naming it).
for path in workflow.configfiles:
    load_config_file(path)
# Every problem at once: the config's, and the models' architectures, tags and widths against the libraries' name
# lists (cached per library version; checked by the main process, not again in every job).
CFG = load_config(
    config,
    schema=os.path.join(ZOOMEVAL_ROOT, "workflow", "schemas", "config.schema.yaml"),
    catalogues=CATALOGUES if workflow.is_main_process else None,
)
# A workflow profile's placeholder partition or account (profiles/slurm ships 'CHANGE_ME') is refused here, when the
# workflow is parsed: before any job is submitted, and by a dry run.
refuse_placeholders(workflow.resource_settings.default_resources, workflow.resource_settings.overwrite_resources)
if workflow.is_main_process and (note := cpu_note(CFG.inference.device, CFG.inference.compile)):
    print(note, file=sys.stderr)
R = CFG.resources
# Every path under the results and logs roots comes from the layout (zoomeval.core.layout), whose roots are chosen
# here once: `results` and `logs`, or a limited run's own `results/limit-N` and `logs/limit-N` (config key limit).
LAYOUT = run_layout(CFG.limit)


def start_checks():
    """The checks that import the model libraries (the Snakefile's onstart, and a study directory's)."""
    from zoomeval.registries import check_models

    check_models(CFG)


DATASETS = list(CFG.datasets)
MODELS = list(CFG.models)
# Scored datasets: name -> (dataset, label set); the dataset's own labels keep its name.
SCORED = {scored_name(d, ls): (d, ls) for d, entry in CFG.datasets.items() for ls in entry.label_sets}
# Datasets whose adapter writes the images (the demo, ImageNet-Hard): their rule declares the image folder.
WRITTEN_DATASETS = [d for d, entry in CFG.datasets.items() if ADAPTERS[entry.adapter].images]
STATS_DATASETS = CFG.stats.datasets
CONDA_ENV = "../../envs/zoomeval.yaml"

# GPU jobs claim the `gpu` resource; run with --resources gpu=N so they never share a GPU.
GPU_PER_JOB = int(claims_gpu(CFG.inference.device))
SAM_GPU = int(CFG.sam is not None and claims_gpu(CFG.sam.device))
# With inference.parts > 1, a predict job writes a part of a prediction job's files (merge_predictions joins them).
PART = "_part" if CFG.inference.parts > 1 else ""


def _under(root, paths):
    """``{path relative to root: value}`` for ``{path: value}`` (the fetch rules' wildcards)."""
    return {os.path.relpath(path, root): value for path, value in paths.items()}


# What the fetch rules make (workflow/rules/fetch.smk), by path under the resources root.
INPUTS = plan_all(CFG)
URLS = _under(R, {i.fetched: i for i in INPUTS.values() if i.spec.url})
SNAPSHOTS = _under(R, {i.fetched: i for i in INPUTS.values() if i.spec.hf})
EXTRACTIONS = _under(R, {i.extracted: i for i in INPUTS.values() if i.extracted})
WEIGHTS = {}  # weights folder (named by the content of a local checkpoint) -> the first model that uses it
for spec in CFG.models.values():
    if (folder := weights_folder(spec, R)) is not None:
        WEIGHTS.setdefault(os.path.relpath(folder, R), spec)
# Zero-shot heads (open_clip models, workflow/rules/inference.smk): model -> head; head -> the first model using it.
HEAD_OF_MODEL = {m: name for m, spec in CFG.models.items() if (name := head_name(spec, R)) is not None}
HEADS = {}
for m, name in HEAD_OF_MODEL.items():
    HEADS.setdefault(name, CFG.models[m])
# ImageNet-Hard datasets, whose table compares the standard evaluation with the dataset card.
HARD_DATASETS = [d for d, entry in CFG.datasets.items() if entry.adapter == "imagenet_hard"]


def _alternation(names):
    return "|".join(map(re.escape, names)) if names else "(?!)"


wildcard_constraints:
    dataset=_alternation(DATASETS),
    model=_alternation(MODELS),
    variant="original|fgset|bgset",
    part=r"\d+",


def part_output(path):
    """A predict job's output: temporary when it is a part, which merge_predictions joins."""
    return temp(path) if PART else path


def variants(dataset):
    return CFG.datasets[dataset].variants


def dataset_inputs(wc):
    """The fetched or extracted inputs of a dataset's manifest job (local paths are read in place)."""
    items = {key: item for (owner, key), item in INPUTS.items() if owner == wc.dataset}
    return {key: item.extracted or item.fetched for key, item in items.items() if item.extracted or item.fetched}


def weights_input(wc):
    """The folder of a model's fetched weights (none for weights that ship in a package)."""
    return weights_folder(CFG.models[wc.model], R) or []


def checkpoint_input(wc):
    """The local checkpoint file a fetch_weights job places (none for a download): a newer file reruns it."""
    return str(local_checkpoint(WEIGHTS[wc.weights]) or "") or []


def head_input(wc):
    """The zero-shot head a predict, standard_eval or tta job of an open_clip model reads (none for other models)."""
    return LAYOUT.path("zero_shot_head", head=HEAD_OF_MODEL[wc.model]) if wc.model in HEAD_OF_MODEL else []


def head_job_inputs(wc):
    """The weights a head is computed with and the local files it depends on (class names, templates, config)."""
    spec = HEADS[wc.head]
    return {"weights": weights_folder(spec, R), "files": head_inputs(spec)}


def sam_checkpoint_input(wc):
    """The SAM checkpoint the masks read: the download, or the local file (a newer one reruns them)."""
    item = INPUTS["sam", "checkpoint"]
    return item.fetched or str(item.spec.path)


def sam_params(wc):
    """The sam section and a local checkpoint's sha256 (a file replaced by an older one reruns the masks too; a
    download's is the section's)."""
    sha256 = local_file_sha256(INPUTS["sam", "checkpoint"], R)
    return CFG.sam.entry() | ({"checkpoint_sha256": sha256} if sha256 else {})


def masks_input(wc):
    """The mask file an fgset/bgset prediction job needs (none for the original images)."""
    if wc.variant == "original":
        return []
    return LAYOUT.path("masks", dataset=wc.dataset, method=CFG.datasets[wc.dataset].mask_method)


def counts_masks_input(wc):
    """The SAM mask file whose object counts an object_counts job reads (none when counting boxes)."""
    if CFG.datasets[wc.dataset].count_method == "bbox":
        return []
    return LAYOUT.path("masks", dataset=wc.dataset, method="sam_auto")


# What the `study` target (zoomeval run's default) builds besides the study index: every table of the config.
STUDY_TABLES = [LAYOUT.path(table, ext=ext) for table in study_tables(CFG) for ext in ("csv", "md")]


def final_outputs():
    """Everything the `all` target builds: the tables, figures, a contact sheet per mask file in use, the statistics."""
    outputs = list(STUDY_TABLES)
    for d, entry in CFG.datasets.items():
        if set(entry.variants) - {"original"}:
            outputs.append(LAYOUT.path("contact_sheet", dataset=d, method=entry.mask_method))
    if CFG.stats.pairs:
        outputs += [LAYOUT.path("mann_whitney"), LAYOUT.path("object_counts_figure")]
    for scored, (d, _) in SCORED.items():
        outputs += [LAYOUT.path(name, scored=scored) for name in ("upper_bounds", "variants_figure")]
        outputs += [
            LAYOUT.path(name, scored=scored, variant=v, model=m)
            for v in variants(d)
            for m in MODELS
            for name in ("anchor_grid", "scale_curves", "top_k_locations", "centre_bias")
        ]
    if BOXED:
        outputs += [LAYOUT.path("table_where_zoom_helps", ext=ext) for ext in ("csv", "md")]
        outputs += [LAYOUT.path("where_zoom_helps_figure", scored=s) for s in BOXED]
    outputs += browser_outputs()
    return outputs


# The scored datasets whose adapter gives object boxes and that have original images: the where-zoom-helps table's
# (a dataset without boxes has no object size or position to bin by, so the table is not requested without one).
BOXED = [s for s, (d, _) in SCORED.items() if ADAPTERS[CFG.datasets[d].adapter].boxes and "original" in variants(d)]
# The image browser and the hard sets (browser.smk, hard_set.smk) cover the scored datasets with original images.
BROWSED = [s for s, (d, _) in SCORED.items() if "original" in variants(d)]


def of_scored(name, scored="scored"):
    """Input function: output ``name`` of the dataset the job's ``{scored}`` (or other) wildcard scores, with the
    job's own values of the output's other wildcards (variant, model)."""

    def path(wc):
        others = {key: getattr(wc, key) for key in OUTPUTS[name].wildcards if key != "dataset"}
        return LAYOUT.path(name, dataset=SCORED[getattr(wc, scored)][0], **others)

    return path


# The bad_images.csv of a scored dataset (the images its tables note as left out), and its manifest.
bad_images_input = of_scored("bad_images")
browser_manifest = of_scored("manifest")


def browser_matrices(wc):
    """Every (model, variant) matrix of a scored dataset, models outermost (the order the script pairs them in)."""
    dataset = SCORED[wc.scored][0]
    return [LAYOUT.path("correct", scored=wc.scored, variant=v, model=m) for m in MODELS for v in variants(dataset)]


def original_analysis(name):
    """Input function: output ``name`` (``correct``, ``cover``) of each model's analysis of the original images."""
    return lambda wc: [LAYOUT.path(name, scored=wc.scored, variant="original", model=m) for m in MODELS]


def browser_outputs():
    """What `all` builds for the image browser and the hard sets."""
    return [LAYOUT.path("browser"), LAYOUT.path("hard_summary", ext="csv"), LAYOUT.path("hard_summary", ext="md")]


def labels_input(wc):
    """The labels file the analysis of a scored dataset reads besides its manifest: Shankar et al.'s annotations
    (workflow/rules/multilabel.smk) for the multilabel and imagenet_m label sets, none for the others."""
    dataset, label_set = SCORED[wc.scored]
    labels_file = LABEL_SETS[label_set].labels_file
    return LAYOUT.path("labels", dataset=dataset, labels_file=labels_file) if labels_file else []


# `snakemake --report` before its targets are built says which to build first (Snakemake would name one missing file).
create_report = workflow.create_report


def create_report_when_built(*args, **kwargs):
    builds = {r.name: [str(f) for f in r.output or r.input] for r in workflow.rules if not r.has_wildcards()}
    check_built(workflow.dag_settings.targets, builds)
    create_report(*args, **kwargs)


workflow.create_report = create_report_when_built
