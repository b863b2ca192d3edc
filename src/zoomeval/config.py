"""Checks of the workflow config beyond its JSON schema; run before any job starts.

The schema (``workflow/schemas/config.schema.yaml``) catches unknown keys and wrong types; these checks
catch what needs knowledge of the package: unknown models or weights tags, missing dataset folders,
variants that need boxes on a dataset without boxes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Adapters whose manifests carry object boxes (needed by the fgset/bgset variants with ``bbox`` masks).
ADAPTERS_WITH_BOXES = {"demo"}


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def check_config(config: dict[str, Any]) -> None:
    for name, entry in config["datasets"].items():
        key = f"datasets.{name}"
        if entry["adapter"] == "imagefolder":
            root = entry.get("root")
            if not root:
                raise ConfigError(f"{key}.root is required for adapter imagefolder: the folder of wnid sub-folders")
            if not Path(root).is_dir():
                raise ConfigError(f"{key}.root: folder {root!r} does not exist; point it at the dataset's folder")
        needs_masks = set(entry.get("variants", [])) - {"original"}
        if needs_masks and entry["adapter"] not in ADAPTERS_WITH_BOXES:
            raise ConfigError(
                f"{key}.variants: {sorted(needs_masks)} need object boxes, which adapter "
                f"{entry['adapter']!r} does not provide; use variants: [original]"
            )
    for name, entry in config["models"].items():
        check_model(f"models.{name}", entry)


def check_model(key: str, entry: dict[str, Any]) -> None:
    source, arch, weights = entry["source"], entry["architecture"], entry["weights"]
    if source == "embedded":
        from zoomeval import embedded

        if weights != embedded.WEIGHTS_FILE:
            raise ConfigError(f"{key}.weights: the embedded model ships {embedded.WEIGHTS_FILE!r}, not {weights!r}")
        if arch != embedded.ARCHITECTURE:
            raise ConfigError(f"{key}.architecture: the embedded weights fit {embedded.ARCHITECTURE!r}, not {arch!r}")
    elif source == "torchvision":
        import torchvision

        if arch not in torchvision.models.list_models():
            raise ConfigError(
                f"{key}.architecture: {arch!r} is not a torchvision model (see torchvision.models.list_models())"
            )
        tags = [w.name for w in torchvision.models.get_model_weights(arch)]
        if weights not in tags:
            raise ConfigError(f"{key}.weights: {arch} has weights tags {tags}, not {weights!r}")
    elif source == "timm":
        import timm

        if not timm.is_model(arch):
            raise ConfigError(f"{key}.architecture: {arch!r} is not a timm model (timm.list_models())")
        if f"{arch}.{weights}" not in timm.list_pretrained(f"{arch}.*"):
            tags = [n.split(".", 1)[1] for n in timm.list_pretrained(f"{arch}.*")]
            raise ConfigError(f"{key}.weights: {arch} has pretrained tags {tags}, not {weights!r}")
