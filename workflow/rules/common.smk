# Config validation (normalisation, the JSON schema, then the package's own checks) before any job starts.
import os
import re

from zoomeval.analysis import scored_name
from zoomeval.core.config import validate_config
from zoomeval.datasets.build import ADAPTER_INPUTS

validate_config(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))

DATASETS = list(config["datasets"])
MODELS = list(config["models"])
# Scored datasets: name -> (dataset, label set); the dataset's own labels keep its name.
SCORED = {scored_name(d, ls): (d, ls) for d in DATASETS for ls in config["datasets"][d].get("label_sets", ["in"])}
GENERATED_DATASETS = [d for d in DATASETS if config["datasets"][d]["adapter"] == "demo"]


def _uses_gpu():
    device = config["inference"]["device"]
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return device.startswith("cuda")


# GPU inference jobs claim the `gpu` resource; run with --resources gpu=N so they never share a GPU.
GPU_PER_JOB = 1 if _uses_gpu() else 0


def _alternation(names):
    return "|".join(map(re.escape, names)) if names else "(?!)"


wildcard_constraints:
    dataset=_alternation(DATASETS),
    model=_alternation(MODELS),
    variant="original|fgset|bgset",


def variants(dataset):
    return config["datasets"][dataset]["variants"]


def canonical(entry):
    """A config mapping with sorted keys, so that reordering keys in the YAML does not re-run jobs."""
    return {k: entry[k] for k in sorted(entry)}


def dataset_source(dataset):
    """The dataset entry's keys that decide its manifest (not its variants or class set)."""
    entry = config["datasets"][dataset]
    inputs = set().union(*ADAPTER_INPUTS[entry["adapter"]])
    return canonical({k: entry[k] for k in entry if k in {"adapter", "scenes", "password"} or k in inputs})


CONDA_ENV = "../../envs/zoomeval.yaml"


def masks_input(wc):
    """The mask file an fgset/bgset prediction job needs (none for the original images)."""
    if wc.variant == "original":
        return []
    return f"results/masks/{wc.dataset}/{config['datasets'][wc.dataset].get('mask_method', 'bbox')}.parquet"


def counts_masks_input(wc):
    """The SAM mask file whose object counts an object_counts job reads (none when counting boxes)."""
    if config["datasets"][wc.dataset]["count_method"] == "bbox":
        return []
    return f"results/masks/{wc.dataset}/sam_auto.parquet"


def _sam_on_gpu():
    device = config.get("sam", {}).get("device", "auto")
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return device.startswith("cuda")


SAM_GPU = 1 if "sam" in config and _sam_on_gpu() else 0
STATS_PAIRS = config.get("stats", {}).get("pairs", [])
STATS_DATASETS = sorted({d for pair in STATS_PAIRS for d in pair})


def final_outputs():
    """Everything the `all` target builds: the tables, figures, a contact sheet per mask file in use, the statistics."""
    tables = ("table_a8", "table_1", "table_zoom_groups", "table_aggregation")
    outputs = [f"results/{table}.{ext}" for table in tables for ext in ("csv", "md")]
    for d in DATASETS:
        entry = config["datasets"][d]
        if set(entry["variants"]) - {"original"}:
            outputs.append(f"results/masks/{d}/{entry.get('mask_method', 'bbox')}_contact_sheet.png")
    if STATS_PAIRS:
        outputs += ["results/stats/mannwhitney.csv", "results/stats/object_counts.png"]
    for scored, (d, _) in SCORED.items():
        outputs += [f"results/figures/{scored}/{name}.png" for name in ("upper_bounds", "variants")]
        outputs += [
            f"results/figures/{scored}/{v}/{m}/{name}.png"
            for v in variants(d)
            for m in MODELS
            for name in ("anchor_grid", "scale_curves", "top_k_locations", "centre_bias")
        ]
    return outputs
