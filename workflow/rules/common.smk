# Config validation (JSON schema, then the package's own checks) before any job starts, and helpers.
from snakemake.utils import validate

from zoomeval.analysis import scored_name
from zoomeval.config import ADAPTERS_WITH_BOXES, check_config
from zoomeval.datasets import ADAPTER_INPUTS

validate(config, "../schemas/config.schema.yaml")
for _entry in config["datasets"].values():
    # object-only and background-only variants need boxes; datasets without boxes default to the original
    _entry.setdefault("variants", ["original", "fgset", "bgset"] if _entry["adapter"] in ADAPTERS_WITH_BOXES else ["original"])
check_config(config)

DATASETS = list(config["datasets"])
MODELS = list(config["models"])
# Scored datasets: name -> (dataset, label set); the dataset's own labels keep its name.
SCORED = {
    scored_name(d, ls): (d, ls) for d in DATASETS for ls in config["datasets"][d].get("label_sets", ["in"])
}
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
    return "|".join(names) if names else "(?!)"


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
    return canonical({k: entry[k] for k in entry if k == "adapter" or k in inputs})


CONDA_ENV = "../../envs/zoomeval.yaml"


def masks_input(wc):
    """The mask file an fgset/bgset prediction job needs (none for the original images)."""
    if wc.variant == "original":
        return []
    return f"results/masks/{wc.dataset}/{config['datasets'][wc.dataset].get('mask_method', 'bbox')}.parquet"
