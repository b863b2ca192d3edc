# Config validation (JSON schema, then the package's own checks) before any job starts, and helpers.
from snakemake.utils import validate

from zoomeval.config import check_config

validate(config, "../schemas/config.schema.yaml")
check_config(config)

DATASETS = list(config["datasets"])
MODELS = list(config["models"])
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
