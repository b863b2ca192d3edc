"""Checks of the workflow config beyond its JSON schema; run before any job starts.

The schema (``workflow/schemas/config.schema.yaml``) catches unknown keys and wrong types; these checks
catch what needs knowledge of the package: unknown models or weights tags, missing dataset folders,
variants that need boxes on a dataset without boxes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Adapters whose manifests carry object boxes (needed by the fgset/bgset variants with ``bbox`` masks).
ADAPTERS_WITH_BOXES = {"demo", "imagenet_val"}
#: Adapters whose manifests carry ImageNet-ReaL labels (needed by the ``real``/``in_real`` label sets).
ADAPTERS_WITH_REAL = {"imagenet_val"}


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def check_config(config: dict[str, Any]) -> None:
    from zoomeval.datasets import ADAPTER_INPUTS

    for name, entry in config["datasets"].items():
        key = f"datasets.{name}"
        adapter = entry["adapter"]
        required, optional = ADAPTER_INPUTS[adapter]
        for field in sorted(required):
            if not entry.get(field):
                raise ConfigError(f"{key}.{field} is required for adapter {adapter}: a local path, url or hf source")
        for field in sorted(required | optional):
            _check_local(f"{key}.{field}", entry.get(field))
        needs_masks = set(entry.get("variants", [])) - {"original"}
        if needs_masks and adapter not in ADAPTERS_WITH_BOXES:
            raise ConfigError(
                f"{key}.variants: {sorted(needs_masks)} need object boxes, which adapter "
                f"{adapter!r} does not provide; use variants: [original]"
            )
        uses_sam = entry.get("mask_method", "bbox") != "bbox" or entry.get("count_method") == "sam_auto"
        if uses_sam and "sam" not in config:
            raise ConfigError(f"{key}: SAM masks or counts need a top-level sam section (model_type, checkpoint)")
        if entry.get("count_method") == "bbox" and adapter not in ADAPTERS_WITH_BOXES:
            raise ConfigError(f"{key}.count_method: adapter {adapter!r} has no boxes to count; use sam_auto")
        needs_real = set(entry.get("label_sets", [])) - {"in"}
        if needs_real and adapter not in ADAPTERS_WITH_REAL:
            raise ConfigError(
                f"{key}.label_sets: {sorted(needs_real)} need ImageNet-ReaL labels, which only adapter "
                f"imagenet_val provides; use label_sets: [in]"
            )
    for pair in config.get("stats", {}).get("pairs", []):
        for name in pair:
            if name not in config["datasets"]:
                raise ConfigError(
                    f"stats.pairs: {name!r} is not a dataset of this config; use one of {list(config['datasets'])}"
                )
    _check_local("sam.checkpoint", config.get("sam", {}).get("checkpoint"))
    for name, entry in config["models"].items():
        check_model(f"models.{name}", entry)


def _check_local(key: str, spec: str | dict[str, Any] | None) -> None:
    """A local input (a path string or ``{path: ...}``) must exist; URLs and Hugging Face inputs are fetched later."""
    path = spec if isinstance(spec, str) else (spec or {}).get("path")
    if path and not Path(path).exists():
        raise ConfigError(f"{key}: {path!r} does not exist; download it and point the key at it, or give a url")


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
        from zoomeval.models import timm_hub_source

        try:
            timm_hub_source(f"{arch}.{weights}")
        except ValueError as exc:
            raise ConfigError(f"{key}.weights: {weights!r}: {exc}") from None
