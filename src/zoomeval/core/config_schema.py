"""The config's JSON schema, ``workflow/schemas/config.schema.yaml``: the one declaration of every key, with its type,
range and default. The typed config (:mod:`zoomeval.core.config`) takes its defaults from it (:func:`schema_defaults`),
the validator (:mod:`zoomeval.core.validate`) its types, and the generated reference pages everything else.

The schema stays the source, rather than a typed model the schema would be generated from, because most of its 880
lines are what no model declares (each key's ``x-reruns``, ``x-details`` and ``x-default``, the error hints of
``description``) and because Snakemake validates the config against this file (see docs/reference/development.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from zoomeval.core.provenance import workflow_root


def schema_file() -> Path:
    """The config's JSON schema file, in the workflow's folder (:func:`~zoomeval.core.provenance.workflow_root`)."""
    return workflow_root() / "workflow" / "schemas" / "config.schema.yaml"


@cache
def config_schema() -> dict[str, Any]:
    """The schema, read once per process (shared: do not change it)."""
    with schema_file().open(encoding="utf-8") as file:
        return yaml.load(file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def key_schema(*keys: str) -> dict[str, Any]:
    """The schema of the config key at ``keys``; ``*`` steps into a dataset's or model's entry
    (``key_schema("models", "*")``)."""
    node = config_schema()
    for key in keys:
        node = node["additionalProperties"] if key == "*" else node["properties"][key]
    return node


def schema_defaults(*keys: str, makers: Mapping[str, Callable[[Any], Any]] | None = None) -> Callable[[type], type]:
    """A class decorator, placed under ``@dataclass``: each field that is a key of the section at ``keys`` takes
    the schema's ``default`` of that key as its default, typed (``makers[key]`` applied to it; else lists as tuples,
    integers as floats where the schema wants a number, mappings copied for each instance); a field typed by a maker
    whose key has no ``default`` and no required keys defaults to the maker's value of no keys (its section, all
    defaults). So the class declares no default of its own, and a key the schema gives no default has none.
    """

    def apply(cls: type) -> type:
        section, own = key_schema(*keys), cls.__dict__.get("__annotations__", {})
        for name, value in _defaults(section, makers or {}).items():
            if name in own:
                setattr(cls, name, value)
        return cls

    return apply


def _defaults(section: dict[str, Any], makers: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
    values = {}
    for key, node in section["properties"].items():
        if "default" in node:
            value = _typed(node["default"], node)
            values[key] = makers[key](value) if key in makers else _field(value)
        elif key in makers and "properties" in node and not node.get("required"):
            values[key] = makers[key]({})
    return values


def _typed(value: Any, node: dict[str, Any]) -> Any:
    """A default as the typed config holds it (as :func:`zoomeval.core.validate.normalise` types a given value)."""
    if isinstance(value, list):
        items = node.get("items", {})
        return tuple(_typed(item, items) for item in value)
    kinds = value_kinds(node, config_schema())
    if type(value) is int and "number" in kinds and "integer" not in kinds:
        return float(value)
    return value


def _field(value: Any) -> Any:
    return field(default_factory=lambda: dict(value)) if isinstance(value, dict) else value


def value_kinds(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types a value may have under ``schema``: its ``type``, else those of its ``oneOf`` / ``anyOf``
    alternatives (after local references); empty: any type, or an ``enum`` (of strings, in this schema)."""
    if "$ref" in schema:
        schema = {**ref_target(root, schema["$ref"]), **schema}
    if "type" in schema:
        return set([schema["type"]] if isinstance(schema["type"], str) else schema["type"])
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches:
        kinds = [value_kinds(branch, root) for branch in branches]
        return set() if set() in kinds else set().union(*kinds)
    return set()


def ref_target(root: dict[str, Any], ref: str) -> dict[str, Any]:
    """The schema a local reference (``#/$defs/...``, the only kind the schema uses) points at."""
    target = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return target
