"""The workflow config's validation, run by the Snakefile before any job starts (see :func:`validated_config`).

Values are first normalised (numbers, booleans and nulls given as strings where the schema allows no string,
as ``--config`` passes the items of lists and mappings; integral floats; upper-case checksums), then validated
against the JSON schema (``workflow/schemas/config.schema.yaml``), which catches unknown keys, wrong types and
values out of range. The config is then resolved into its typed form (:mod:`zoomeval.core.config`, whose
defaults are the schema's) and :func:`config_problems` checks what needs the registries: required inputs, missing
local paths, variants that need boxes on a dataset without boxes, label sets the adapter cannot give, names whose
outputs would collide, devices that do not exist; every problem at once, one line each, starting with the key it
concerns.

Checks that need torchvision or timm are not made here: the workflow checks the models' names and widths against
the libraries' cached catalogues, with ``top_k`` against the zoom transforms (:func:`check_top_k`), in
:func:`zoomeval.registries.workflow_problems` (passed as ``more_checks``), and what needs the libraries themselves
runs when a run starts (:func:`zoomeval.registries.check_models`, from the Snakefile's ``onstart``), so that
parsing the workflow and ``snakemake -n`` stay free of the ML stack.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from zoomeval.core.config import Config, ConfigError, InputSpec, Registries, resolve, scored_name
from zoomeval.core.config_schema import ref_target, value_kinds
from zoomeval.core.devices import check_device
from zoomeval.core.strict_yaml import load_yaml
from zoomeval.core.zoom import ZoomGrid

#: The suffix of a prediction file's aggregates beside it (``<model>.aggregates.parquet``).
AGGREGATES_SUFFIX = ".aggregates"
#: Folders of the resources root that the workflow keeps for itself (and what for), so no dataset may be named so.
RESERVED = {"sam": "SAM checkpoint", "weights": "model weights", "labels": "multi-label annotations"}
#: Schema keywords whose jsonschema message does not say what is expected; the schema's description is added.
HINTED = {"pattern", "oneOf", "not", "minimum", "maximum", "exclusiveMinimum"}
#: How YAML spells null (what ``--config`` passes for ``key: null`` or ``key: ~`` within a mapping or list).
NULLS = {"null", "Null", "NULL", "~", ""}


def validated_config(
    config: dict[str, Any],
    schema: str | Path,
    registries: Registries,
    check_paths: bool = True,
    more_checks: Callable[[Config], list[str]] | None = None,
) -> tuple[Config, list[str]]:
    """Validate ``config`` as the Snakefile does: normalise it in place, validate it against the JSON schema file
    ``schema`` (through Snakemake's validator), resolve it and check it (:func:`config_problems`), the problems
    ``more_checks`` finds in the typed config listed with the others; return it typed with its problems (``zoomeval
    run``'s preflight lists them with its own; :func:`refuse_problems` raises them). A config that does not pass the
    schema, which has no typed form, is raised. With ``check_paths=False`` local inputs need not exist (to check
    example configs)."""
    from jsonschema import ValidationError
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    normalise(config, load_yaml(schema))
    try:
        validate(config, str(Path(schema).resolve()), set_default=False)
    except WorkflowError as error:
        if not isinstance(error.__context__, ValidationError):
            raise
        raise ConfigError(schema_message(error.__context__)) from None
    typed = resolve(config, registries)
    return typed, config_problems(typed, registries, check_paths) + (more_checks(typed) if more_checks else [])


def refuse_problems(typed: Config, problems: list[str]) -> Config:
    """The typed config of :func:`validated_config`, or its problems raised as one :class:`ConfigError`, a line
    each."""
    if problems:
        raise ConfigError("\n".join(problems))
    return typed


def normalise(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Turn values that spell the schema's type into it, in place: integers, numbers, booleans and nulls given
    as strings where the key's schema (its ``type``, or its ``oneOf`` / ``anyOf`` alternatives) allows no string
    (``--config`` passes the items of lists and mappings as strings), integral floats where the schema wants
    integers, integers where it wants numbers (floats: one canonical form, so that an override equal to the value
    in force changes no rule's params), and checksums in upper case. Refuse a number that is not finite (the JSON schema
    cannot: NaN passes every bound)."""
    _normalise(config, schema, schema, ())
    for entry in [*_mappings(config.get("datasets")), config.get("sam"), {"multilabel": config.get("multilabel")}]:
        for spec in _mappings(entry):
            if isinstance(spec.get("sha256"), str):
                spec["sha256"] = spec["sha256"].strip().lower()


def _mappings(value: Any) -> list[dict[str, Any]]:
    """The mappings among a mapping's values (none when ``value`` is not a mapping)."""
    return [v for v in value.values() if isinstance(v, dict)] if isinstance(value, dict) else []


def _normalise(value: Any, schema: dict[str, Any], root: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    if "$ref" in schema:
        schema = {**ref_target(root, schema["$ref"]), **schema}
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
    kinds = value_kinds(schema, root)
    if isinstance(value, str) and "string" not in kinds:  # a string has one meaning only where none is allowed
        if "null" in kinds and value.strip() in NULLS:
            value = None
        elif kinds & {"integer", "number"}:
            value = _number(value)
        if isinstance(value, str) and "boolean" in kinds:
            value = {"true": True, "false": False}.get(value.strip().lower(), value)
    if "integer" in kinds and "number" not in kinds and isinstance(value, float) and value.is_integer():
        value = int(value)
    if "number" in kinds and "integer" not in kinds and type(value) is int:  # not bool: the schema refuses it
        value = float(value)  # 16 and 16.0 are one value; as rule params they would differ (Snakemake compares reprs)
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
    if "propertyNames" in error.schema_path:  # a name of a dataset or model: say which and what a name may be
        name, size = error.instance, len(error.instance)
        name = repr(name) if size <= 60 else f"{name[:40]!r}... ({size} characters)"
        return f"{dotted(error.absolute_path)}: {name} is not a valid name: {error.schema['description']}"
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


def config_problems(config: Config, registries: Registries, check_paths: bool = True) -> list[str]:
    """The checks the schema cannot make, on a typed config (``check_paths=False``: local inputs need not exist):
    the message of every check that fails, in order, each once, and every local input that does not exist
    (:func:`missing_inputs`), so that a dry run lists them all at once rather than the first."""
    checks: list[Callable[[], None]] = [partial(check_names, config), partial(check_stats, config)]
    checks += [partial(check_dataset, config, d, registries, check_paths) for d in config.datasets.values()]
    checks += [partial(check_device, "inference.device", config.inference.device), partial(check_compile, config)]
    if config.sam is not None:
        checks.append(partial(check_device, "sam.device", config.sam.device))
    checks += [partial(check_model_entry, model, registries, check_paths) for model in config.models.values()]
    checks += [partial(check_tta, config), partial(check_policies, config), partial(check_where_zoom_helps, config)]
    problems = []
    for check in checks:
        try:
            check()
        except ConfigError as error:
            problems.append(str(error))
    if check_paths:
        problems += missing_inputs(config)
    return list(dict.fromkeys(problems))


def missing_inputs(config: Config) -> list[str]:
    """One line per local input of the config (dataset inputs, the SAM checkpoint, model checkpoints) that does not
    exist, naming its key; URLs and Hugging Face inputs are fetched later. (The multilabel annotations are checked
    with the label sets that read them.)"""
    inputs = [(f"datasets.{d.name}.{key}", spec) for d in config.datasets.values() for key, spec in d.inputs.items()]
    if config.sam is not None:
        inputs.append(("sam.checkpoint", config.sam.checkpoint))
    for model in config.models.values():
        if model.checkpoint is not None and set(model.weights) != {"0"}:
            inputs.append((f"models.{model.name}.checkpoint", InputSpec.from_config(model.checkpoint)))
    problems = []
    for key, spec in inputs:
        try:
            check_local_input(key, spec)
        except ConfigError as error:
            problems.append(str(error))
    return problems


def check_compile(config: Config) -> None:
    """``compile: true`` with ``device: cpu`` asks for what the jobs do on CUDA only (with ``auto`` resolved to a CPU
    they turn it off, saying so: :meth:`~zoomeval.core.config.InferenceSettings.for_device`)."""
    if config.inference.compile and config.inference.device == "cpu":
        raise ConfigError(
            "inference.compile: true with inference.device: cpu; torch.compile is used on CUDA only (on "
            "a CPU it needs a C++ toolchain and has crashed jobs): set compile: false, or device: auto "
            "to compile where a GPU is found"
        )


def check_top_k(config: Config) -> None:
    """``top_k`` greedy picks must fit in the zoom transforms (9 anchors per scale): more would make acc_top_k the
    accuracy of every transform under another name. Checked when the workflow's main process parses it (and so by
    ``snakemake -n`` and ``zoomeval run``'s preflight: :func:`zoomeval.registries.workflow_problems`), not in jobs."""
    if config.top_k > (transforms := ZoomGrid(config.scales).n_transforms):
        raise ConfigError(
            f"top_k: {config.top_k} picks from {transforms} zoom transforms ({len(config.scales)} scales "
            f"x 9 anchors); give top_k <= {transforms} or more scales"
        )


def check_stats(config: Config) -> None:
    if unknown := [name for name in config.stats.datasets if name not in config.datasets]:
        raise ConfigError(
            f"stats.pairs: {unknown[0]!r} is not a dataset of this config; use one of {list(config.datasets)}"
        )


def check_model_entry(model: Any, registries: Registries, check_paths: bool) -> None:
    """A model entry's checkpoint key: read by its source (one that declares ``local``), and pinned by a real
    sha256."""
    readers = [s.name for s in registries.sources.values() if s.local is not None]
    if model.checkpoint is not None and model.source not in readers:
        raise ConfigError(
            f"models.{model.name}.checkpoint: only sources {', '.join(readers)} read it; remove it "
            f"from this {model.source} model"
        )
    if check_paths and model.checkpoint is not None and set(model.weights) == {"0"}:  # config/tta.yaml's
        raise ConfigError(
            f"models.{model.name}.weights: the placeholder sha256 names no file; put the sha256 of "
            "the checkpoint you verified (sha256sum FILE)"
        )


def check_policies(config: Config) -> None:
    """``policies.transfer`` names two different scored datasets of the config that share a variant."""
    scored = {scored_name(d, ls): entry for d, entry in config.datasets.items() for ls in entry.label_sets}
    for k, (source, target) in enumerate(config.policies.transfer):
        for name in (source, target):
            if name not in scored:
                raise ConfigError(
                    f"policies.transfer[{k}]: {name!r} is not a scored dataset of this config; use one "
                    f"of {list(scored)}"
                )
        if source == target:
            raise ConfigError(
                f"policies.transfer[{k}]: source and target are both {source!r}; cross-validation "
                "already holds images out within a dataset"
            )
        if not set(scored[source].variants) & set(scored[target].variants):
            raise ConfigError(f"policies.transfer[{k}]: {source!r} and {target!r} share no variant")


def check_where_zoom_helps(config: Config) -> None:
    """``where_zoom_helps.budget`` is a budget the policies are scored at: one of ``policies.budgets``, or at least the
    number of transforms (every view, which is always scored; zoomeval.analysis.policy_eval.budgets_for)."""
    budget, n_transforms = config.where_zoom_helps.budget, ZoomGrid(config.scales).n_transforms
    if budget < n_transforms and budget not in config.policies.budgets:
        raise ConfigError(
            f"where_zoom_helps.budget: {budget} is not one of policies.budgets "
            f"{list(config.policies.budgets)} (nor {n_transforms} or more: every view); add it there "
            "or choose one of them"
        )


def check_tta(config: Config) -> None:
    """The datasets, models and paper_models the ``tta`` section names must be the config's."""
    for key, names, known in (
        ("tta.datasets", config.tta.datasets, config.datasets),
        ("tta.models", config.tta.models, config.models),
        ("tta.paper_models", config.tta.paper_models, config.models),
    ):
        if unknown := [name for name in names if name not in known]:
            what = key[4:].removeprefix("paper_")
            raise ConfigError(f"{key}: {unknown[0]!r} is not in this config's {what}; use one of {list(known)}")


def check_dataset(config: Config, dataset: Any, registries: Registries, check_paths: bool) -> None:
    """The checks of one dataset entry against its adapter's declarations."""
    key, adapter = f"datasets.{dataset.name}", registries.adapters[dataset.adapter]
    for name in adapter.required:
        if name not in dataset.inputs:
            raise ConfigError(f"{key}.{name} is required for adapter {adapter.name}: a local path, url or hf source")
    needs_masks = set(dataset.variants) - {"original"}
    if needs_masks and not adapter.boxes:
        raise ConfigError(
            f"{key}.variants: {sorted(needs_masks)} need object boxes, which adapter {adapter.name!r} does not "
            "provide; use variants: [original]"
        )
    uses_sam = dataset.mask_method != "bbox" or dataset.count_method == "sam_auto"
    if uses_sam and config.sam is None:
        raise ConfigError(f"{key}: SAM masks or counts need a top-level sam section (model_type, checkpoint)")
    if dataset.count_method == "bbox" and not adapter.boxes:
        raise ConfigError(f"{key}.count_method: adapter {adapter.name!r} has no boxes to count; use sam_auto")
    for index, name in enumerate(dataset.label_sets):
        if (check := registries.label_sets[name].check) is not None:
            check(config, dataset, index, check_paths)
        needs = registries.label_sets[name].needs
        if needs and not getattr(adapter, needs, False):
            providers = [a.name for a in registries.adapters.values() if getattr(a, needs, False)]
            raise ConfigError(
                f"{key}.label_sets: {name!r} needs {registries.label_sets[name].source}, which adapter "
                f"{adapter.name!r} does not provide (adapters that do: {providers}); use label_sets: [in]"
            )


def check_names(config: Config) -> None:
    """Refuse names whose outputs would land in the same files: a dataset name or a scored name
    (``<dataset>_<label set>``, a Table A8 row and a folder under ``results/analysis``) claimed twice, a model
    name that is another's aggregates or part file, or names that differ only in case (one folder on the
    case-insensitive file systems of macOS and Windows)."""
    datasets: dict[str, tuple[str, str, str]] = {}
    for name, entry in config.datasets.items():
        if name.casefold() in RESERVED:
            raise ConfigError(
                f"datasets.{name}: {config.resources}/{name}/ is where the workflow keeps its "
                f"{RESERVED[name.casefold()]}; rename the dataset"
            )
        _claim(datasets, name, f"datasets.{name}", f"dataset {name!r}")
        for i, label_set in enumerate(entry.label_sets):
            if (scored := scored_name(name, label_set)) != name:
                what = f"its {label_set} scoring, named {scored!r}"
                _claim(datasets, scored, f"datasets.{name}.label_sets[{i}]", what)
    models: dict[str, tuple[str, str, str]] = {}
    for name in config.models:
        if name.endswith(AGGREGATES_SUFFIX):
            raise ConfigError(
                f"models.{name}: a model name cannot end in {AGGREGATES_SUFFIX}: its predictions would be the "
                f"aggregates file of a model {name.removesuffix(AGGREGATES_SUFFIX)!r}; rename it"
            )
        if part := re.search(r"\.part\d+$", name):
            raise ConfigError(
                f"models.{name}: a model name cannot end in {part[0]}: with inference.parts its predictions would "
                f"be a part file of a model {name.removesuffix(part[0])!r}; rename it"
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


def check_local_input(key: str, spec: InputSpec) -> None:
    """A local input (a path string or ``{path: ...}``) must exist; URLs and Hugging Face inputs are fetched later."""
    path = spec.path
    if path and not Path(path).exists():
        raise ConfigError(f"{key}: {path!r} does not exist; download it and point the key at it, or give a url")
