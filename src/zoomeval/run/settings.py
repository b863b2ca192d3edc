"""``zoomeval run --set KEY=VALUE`` changes the study's config for one run without editing its file: each setting
(:func:`parse_setting`) is applied to the config as read (:func:`with_settings`) before it is checked, so it gets
the file's checks and refusals, and reaches Snakemake as ``--config`` entries
(:attr:`~zoomeval.run.plan.RunPlan.overrides`) that are read back as Snakemake reads them and must give the same
config (:func:`refuse_lost_settings`)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from zoomeval.core.config import ConfigError
from zoomeval.core.strict_yaml import YTE_KEY, loads_yaml
from zoomeval.registries import load_config

#: One ``zoomeval run --set`` setting: a dotted key into the config (``inference.batch_size``) and its value.
Setting = tuple[str, Any]
#: A top-level config key as Snakemake's ``--config KEY=VALUE`` takes it (its parse_config's pattern; no option: it
#: starts with no ``-``).
CONFIG_KEY = re.compile(r"[A-Za-z_][\w-]*\w")
#: How a setting's VALUE is written: an example of each form, for the refusals.
VALUE_FORMS = "a scalar (3, cpu, null), a flow list [64, 256] or a flow mapping {key: value}"


def setting_text(setting: Setting) -> str:
    """``KEY=VALUE`` with the value as JSON (YAML's flow style: ``--set`` reads it back as it was), on one line."""
    key, value = setting
    return f"{key}={json.dumps(value)}"


def parse_setting(item: str) -> Setting:
    """``KEY=VALUE`` of ``zoomeval run --set``: KEY a dotted path of config keys (``top_k``,
    ``inference.batch_size``, ``datasets.demo.variants``), VALUE one YAML value read as strictly as a config file
    (:func:`~zoomeval.core.strict_yaml.loads_yaml`: no template key, no tag naming Python code) and written on one
    line: a scalar or a flow list or mapping (``[64, 256]``, ``{key: value}``), no anchor or alias, only plain values
    (text, numbers, booleans, null; text keys). Anything else is refused in one line naming the item."""
    key, equals, text = item.partition("=")
    if not equals:
        raise ConfigError(f"{item!r} is no KEY=VALUE (e.g. top_k=3, inference.batch_size=16)")
    parts = key.split(".")
    if not all(part.isprintable() and part.split() == [part] and part != YTE_KEY for part in parts):
        raise ConfigError(f"{item!r}: {key!r} is no dotted path of config keys (e.g. top_k, inference.batch_size)")
    if not text.strip():
        raise ConfigError(f"{item!r} gives no VALUE after '=' (null for none)")
    try:
        value = loads_yaml(text, "VALUE")
        style = _flow_style(text)
    except ConfigError as error:
        why = str(error).removeprefix("VALUE: ").removesuffix("; not a YAML file zoomeval reads")
        raise ConfigError(f"{item!r}: its VALUE is no YAML value ({why}); give {VALUE_FORMS}") from None
    if style:
        raise ConfigError(f"{item!r}: its VALUE has {style}; give {VALUE_FORMS}")
    if not _plain(value):
        raise ConfigError(
            f"{item!r}: its VALUE holds what no config key takes (a date, binary, a set, a key that is not text); "
            "quote text: '2024-01-01'"
        )
    return key, value


def _flow_style(text: str) -> str | None:
    """What in the (parsed) YAML ``text`` is not one flow-style value: a block list or mapping, an anchor or an
    alias (None: nothing)."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            return "an anchor or alias"
        if isinstance(event, yaml.CollectionStartEvent) and not event.flow_style:
            return "a block list or mapping (write it in flow style, on one line)"
    return None


def _plain(value: Any) -> bool:
    """Whether ``value`` is made of what JSON writes: text, numbers, booleans, null, lists and text-keyed mappings."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def with_settings(config: dict[str, Any], settings: Sequence[Setting]) -> dict[str, Any]:
    """Apply ``settings`` to ``config`` in place, in order, and return it: each value set at its dotted key (the
    mappings on the way made where the config has none), a mapping merged into a mapping key by key as
    Snakemake merges ``--config`` into the config file (the keys it does not give are kept), anything else
    replacing what was there. A key that steps into a value that is no mapping is refused naming the setting."""
    for key, value in settings:
        *path, last = key.split(".")
        node = config
        for depth, part in enumerate(path):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = ".".join(path[: depth + 1])
                raise ConfigError(
                    f"--set {setting_text((key, value))}: {where} is {_kind(node)}, not a mapping of keys; "
                    f"set {where} itself (--set {where}=...)"
                )
        _merge(node, last, copy.deepcopy(value))
    return config


def _kind(value: Any) -> str:
    return "null" if value is None else "a list" if isinstance(value, list) else f"the value {json.dumps(value)}"


def _merge(node: dict[str, Any], key: str, value: Any) -> None:
    """``node[key] = value``, a mapping into a mapping key by key (Snakemake's ``update_config``)."""
    if isinstance(value, dict) and isinstance(node.get(key), dict):
        for name, item in value.items():
            _merge(node[key], name, item)
    else:
        node[key] = value


def overrides(settings: Sequence[Setting], checked: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The top-level keys that ``settings`` touch, each with a mapping of the keys they set only (what Snakemake
    merges into the config file; other values of a mapping are left to the file, so that no value travels through
    ``--config`` that need not), their values as ``checked`` (the config with the settings, checked: normalised)
    holds them; ``limit`` left to :attr:`~zoomeval.run.plan.RunPlan.limit`."""
    shape = with_settings({}, settings)  # the keys set, as nested mappings
    return tuple((key, _project(shape[key], checked[key])) for key in shape if key != "limit")


def _project(shape: Any, checked: Any) -> Any:
    """The part of ``checked`` that ``shape``'s keys cover (all of it below a value that is no mapping)."""
    if isinstance(shape, dict) and isinstance(checked, dict):
        return {key: _project(item, checked[key]) for key, item in shape.items() if key in checked}
    return checked


def snakemake_config(file: dict[str, Any], items: Sequence[str]) -> dict[str, Any]:
    """The config a study's Snakefile gets from its config file and ``--config items``, as Snakemake makes it: the
    entries read by its own parser (which reads the values inside a list or mapping as text) and merged by its own
    ``update_config`` into the file's (a mapping key by key), before and after the file (its ``configfile``)."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    given = parse_config(items)
    config = copy.deepcopy(given)
    update_config(config, copy.deepcopy(file))
    update_config(config, given)
    return config


def refuse_lost_settings(file: dict[str, Any], checked: dict[str, Any], items: Sequence[str], path: Path) -> None:
    """Refuse a run whose Snakemake would not get the config that was checked: the config file (at ``path``, named
    in the refusal) and the ``--config`` ``items`` as Snakemake reads them, checked alike (normalised: ``64`` read as
    text is 64 again where the schema types the key), must be ``checked``; a value where the schema types nothing
    (``sam.generator``'s keyword arguments) would reach the workflow as text, and is refused naming its key."""
    seen = snakemake_config(file, items)
    try:
        load_config(seen, check_paths=False)
    except ConfigError as error:
        raise ConfigError(f"--set: the config as Snakemake's --config gives it is refused: {error}") from None
    for key, (ours, theirs) in _differences(checked, seen, "").items():
        raise ConfigError(
            f"--set: {key} would reach Snakemake as {theirs!r}, not {ours!r} (its --config reads the values inside "
            f"a list or mapping as text, and the config's schema does not type this key); set it in {path}"
        )


def _differences(ours: Any, theirs: Any, key: str) -> dict[str, tuple[Any, Any]]:
    """Each dotted key below which ``ours`` and ``theirs`` differ, with both values."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found: dict[str, tuple[Any, Any]] = {}
        for name in [*ours, *(k for k in theirs if k not in ours)]:
            found |= _differences(ours.get(name), theirs.get(name), f"{key}.{name}" if key else str(name))
        return found
    return {} if ours == theirs and type(ours) is type(theirs) else {key or "the config": (ours, theirs)}
