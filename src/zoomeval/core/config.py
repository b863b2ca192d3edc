"""The workflow config's validation, run by the Snakefile before any job starts (see :func:`validate_config`).

Values are first normalised (numbers and booleans given as strings, as ``--config`` passes lists and
mappings; integral floats; upper-case checksums), then validated against the JSON schema
(``workflow/schemas/config.schema.yaml``), which catches unknown keys, wrong types and values out of range
and fills the defaults. :func:`check_config` then checks what needs knowledge of the package: unknown models
or weights tags, missing dataset folders, variants that need boxes on a dataset without boxes, names whose
outputs would collide, devices that do not exist. Every message starts with the key it concerns.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

#: Adapters whose manifests carry object boxes (needed by the fgset/bgset variants with ``bbox`` masks).
ADAPTERS_WITH_BOXES = {"demo", "imagenet_val"}
#: Adapters whose manifests carry ImageNet-ReaL labels (needed by the ``real``/``in_real`` label sets).
ADAPTERS_WITH_REAL = {"imagenet_val"}
#: The suffix of a prediction file's aggregates beside it (``<model>.aggregates.parquet``).
AGGREGATES_SUFFIX = ".aggregates"
#: Schema keywords whose jsonschema message does not say what is expected; the schema's description is added.
HINTED = {"pattern", "oneOf", "not", "minimum", "maximum", "exclusiveMinimum"}


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def validate_config(config: dict[str, Any], schema: str | Path, check_paths: bool = True) -> None:
    """Validate ``config`` in place as the Snakefile does: normalise it, validate it against the JSON schema
    file ``schema`` (filling the schema's defaults, through Snakemake's validator), fill the dataset defaults
    that depend on the adapter and on ``stats.pairs``, then :func:`check_config`. With
    ``check_paths=False`` local inputs need not exist (to check example configs)."""
    from jsonschema import ValidationError
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    normalise(config, yaml.safe_load(Path(schema).read_text()))
    try:
        validate(config, str(Path(schema).resolve()))
    except WorkflowError as error:
        if not isinstance(error.__context__, ValidationError):
            raise
        raise ConfigError(schema_message(error.__context__)) from None
    stats_datasets = {name for pair in config.get("stats", {}).get("pairs", []) for name in pair}
    for name, entry in config["datasets"].items():
        # object-only and background-only variants need boxes; datasets without boxes default to the original
        boxes = entry["adapter"] in ADAPTERS_WITH_BOXES
        entry.setdefault("variants", ["original", "fgset", "bgset"] if boxes else ["original"])
        if name in stats_datasets:  # objects are counted only for the statistics
            entry.setdefault("count_method", "bbox" if boxes else "sam_auto")
    check_config(config, check_paths)


def normalise(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Turn values that spell the schema's type into it, in place: integers, numbers and booleans given as
    strings (``--config`` passes the items of lists and mappings as strings), integral floats where the
    schema wants integers, and checksums in upper case. Refuse a number that is not finite (the JSON schema
    cannot: NaN passes every bound)."""
    _normalise(config, schema, schema, ())
    for entry in [*_mappings(config.get("datasets")), config.get("sam")]:
        for spec in _mappings(entry):
            if isinstance(spec.get("sha256"), str):
                spec["sha256"] = spec["sha256"].strip().lower()


def _mappings(value: Any) -> list[dict[str, Any]]:
    """The mappings among a mapping's values (none when ``value`` is not a mapping)."""
    return [v for v in value.values() if isinstance(v, dict)] if isinstance(value, dict) else []


def _normalise(value: Any, schema: dict[str, Any], root: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    if "$ref" in schema:  # only local references ("#/$defs/...") occur in the schema
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = {**target, **schema}
    if isinstance(value, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra)
            at = (*path, key)
            value[key] = _normalise(item, sub, root, at) if isinstance(sub, dict) else _finite(item, at)
        return value
    if isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            at = (*path, i)
            value[i] = _normalise(item, items, root, at) if isinstance(items, dict) else _finite(item, at)
        return value
    kind = schema.get("type")
    if isinstance(value, str) and kind in ("integer", "number"):
        value = _number(value)
    elif isinstance(value, str) and kind == "boolean":
        value = {"true": True, "false": False}.get(value.strip().lower(), value)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)
    return _finite(value, path)


def _number(text: str) -> str | int | float:
    """The integer or float a string spells, or the string itself."""
    for parse in (int, float):
        try:
            return parse(text.strip())
        except ValueError:
            pass
    return text


def _finite(value: Any, path: tuple[str | int, ...]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{dotted(path)}: {value} is not a finite number; give a finite value")
    if isinstance(value, dict | list):  # free-form sections (sam.generator) are checked too
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            _finite(item, (*path, key))
    return value


def dotted(path: Iterable[str | int]) -> str:
    """A key path as config/README.md writes it: ``datasets.x.mean[0]``."""
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else part
    return key or "the config"


def schema_message(error: Any) -> str:
    """A JSON schema error as ``<key>: <what is wrong>``, with the allowed keys or the schema's description
    where jsonschema's own message does not say what is expected."""
    error = _intended_branch(error)
    message = f"{dotted(error.absolute_path)}: {error.message}"
    if error.validator == "additionalProperties":
        return f"{message}; the keys allowed here are {', '.join(error.schema.get('properties', {}))}"
    if error.validator in HINTED and "description" in error.schema:
        return f"{message} ({error.schema['description']})"
    return message


def _intended_branch(error: Any) -> Any:
    """For a value that fits none of a ``oneOf``'s alternatives, the error within the one alternative whose
    type and required keys it has (e.g. a ``{path, sha256}`` input with a bad checksum), if there is one."""
    from jsonschema.exceptions import best_match

    while error.validator == "oneOf" and error.context:
        branches = defaultdict(list)
        for sub in error.context:
            branches[sub.relative_schema_path[0]].append(sub)
        fitting = [
            subs
            for subs in branches.values()
            if not any(s.validator in ("type", "required") and len(s.relative_schema_path) == 2 for s in subs)
        ]
        if len(fitting) != 1:
            break
        error = best_match(fitting[0])
    return error


def check_config(config: dict[str, Any], check_paths: bool = True) -> None:
    """The checks the schema cannot make, on a config the schema has validated (``check_paths=False``: local
    inputs need not exist)."""
    from zoomeval.core.devices import check_device
    from zoomeval.datasets.build import ADAPTER_INPUTS

    check_names(config)
    stats_datasets = {name for pair in config.get("stats", {}).get("pairs", []) for name in pair}
    for name, entry in config["datasets"].items():
        key = f"datasets.{name}"
        adapter = entry["adapter"]
        required, optional = ADAPTER_INPUTS[adapter]
        for field in sorted(required):
            if not entry.get(field):
                raise ConfigError(f"{key}.{field} is required for adapter {adapter}: a local path, url or hf source")
        for field in sorted(required | optional):
            if check_paths:
                _check_local(f"{key}.{field}", entry.get(field))
        needs_masks = set(entry.get("variants", [])) - {"original"}
        if needs_masks and adapter not in ADAPTERS_WITH_BOXES:
            raise ConfigError(
                f"{key}.variants: {sorted(needs_masks)} need object boxes, which adapter "
                f"{adapter!r} does not provide; use variants: [original]"
            )
        # objects are counted only for the datasets of stats.pairs
        count_method = entry.get("count_method") if name in stats_datasets else None
        uses_sam = entry.get("mask_method", "bbox") != "bbox" or count_method == "sam_auto"
        if uses_sam and "sam" not in config:
            raise ConfigError(f"{key}: SAM masks or counts need a top-level sam section (model_type, checkpoint)")
        if count_method == "bbox" and adapter not in ADAPTERS_WITH_BOXES:
            raise ConfigError(f"{key}.count_method: adapter {adapter!r} has no boxes to count; use sam_auto")
        needs_real = set(entry.get("label_sets", [])) - {"in"}
        if needs_real and adapter not in ADAPTERS_WITH_REAL:
            raise ConfigError(
                f"{key}.label_sets: {sorted(needs_real)} need ImageNet-ReaL labels, which only adapter "
                f"imagenet_val provides; use label_sets: [in]"
            )
    if unknown := sorted(stats_datasets - set(config["datasets"])):
        raise ConfigError(
            f"stats.pairs: {unknown[0]!r} is not a dataset of this config; use one of {list(config['datasets'])}"
        )
    if check_paths:
        _check_local("sam.checkpoint", config.get("sam", {}).get("checkpoint"))
    check_device("inference.device", config.get("inference", {}).get("device", "auto"))
    if "sam" in config:
        check_device("sam.device", config["sam"].get("device", "auto"))
    for name, entry in config["models"].items():
        check_model(f"models.{name}", entry)


def check_names(config: dict[str, Any]) -> None:
    """Refuse names whose outputs would land in the same files: a dataset name or a scored name
    (``<dataset>_<label set>``, a Table A8 row and a folder under ``results/analysis``) claimed twice, a model
    name that is another's aggregates file, or names that differ only in case (one folder on the case-insensitive
    file systems of macOS and Windows)."""
    from zoomeval.analysis import scored_name

    datasets: dict[str, tuple[str, str, str]] = {}
    for name, entry in config["datasets"].items():
        _claim(datasets, name, f"datasets.{name}", f"dataset {name!r}")
        for i, label_set in enumerate(entry.get("label_sets", ["in"])):
            if (scored := scored_name(name, label_set)) != name:
                what = f"its {label_set} scoring, named {scored!r}"
                _claim(datasets, scored, f"datasets.{name}.label_sets[{i}]", what)
    models: dict[str, tuple[str, str, str]] = {}
    for name in config["models"]:
        if name.endswith(AGGREGATES_SUFFIX):
            raise ConfigError(
                f"models.{name}: a model name cannot end in {AGGREGATES_SUFFIX}: its predictions would be the "
                f"aggregates file of a model {name.removesuffix(AGGREGATES_SUFFIX)!r}; rename it"
            )
        _claim(models, name, f"models.{name}", f"model {name!r}")


def _claim(claims: dict[str, tuple[str, str, str]], name: str, key: str, what: str) -> None:
    """Record that ``key`` names outputs ``name``; refuse a name (in any case) that another key names."""
    other_name, other_key, other_what = claims.setdefault(name.casefold(), (name, key, what))
    if other_key != key:
        case = "" if other_name == name else " in all but case, which macOS and Windows file systems ignore"
        raise ConfigError(
            f"{key} ({what}) collides with {other_key} ({other_what}){case}: their Table A8 rows and folders "
            "under results/ would overwrite each other; rename one of the two"
        )


def _check_local(key: str, spec: str | dict[str, Any] | None) -> None:
    """A local input (a path string or ``{path: ...}``) must exist; URLs and Hugging Face inputs are fetched later."""
    path = spec if isinstance(spec, str) else (spec or {}).get("path")
    if path and not Path(path).exists():
        raise ConfigError(f"{key}: {path!r} does not exist; download it and point the key at it, or give a url")


def check_model(key: str, entry: dict[str, Any]) -> None:
    source, arch, weights = entry["source"], entry["architecture"], entry["weights"]
    if source == "embedded":
        from zoomeval.inference import embedded

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
        from zoomeval.inference.models import timm_hub_source

        try:
            timm_hub_source(f"{arch}.{weights}")
        except ValueError as exc:
            raise ConfigError(f"{key}.weights: {weights!r}: {exc}") from None
