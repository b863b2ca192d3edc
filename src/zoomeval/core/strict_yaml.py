"""YAML read strictly: a key given twice in one mapping is refused, naming the key, the file and both lines.

PyYAML's ``safe_load`` (and Snakemake's config loader) silently keep the last of two equal keys, so a config that
gives ``scales:`` twice would run with whichever comes last. Every YAML file the package reads goes through
:func:`load_yaml`; the workflow re-reads its config files with it before validating the config
(``workflow/rules/common.smk``). Merge keys (``<<: *base``) may still be overridden by the mapping's own keys.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from zoomeval.core.config import ConfigError


class DuplicateKeyError(ConfigError):
    """A mapping of a YAML file gives one key twice."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys within a mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):  # SafeLoader refuses it below
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(
                    f"{key_node.start_mark.name}: key {key!r} is given twice, on lines {seen[key]} and {line}; "
                    "keep one (YAML would silently use the last)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def loads_yaml(text: str, name: str = "<string>") -> Any:
    """The document in ``text`` (``name``: the file it came from, for messages); refuses duplicate keys."""
    loader = _StrictLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """The YAML (or JSON) document in the file ``path``; refuses duplicate keys naming the key and both lines."""
    return loads_yaml(Path(path).read_text(encoding="utf-8"), str(path))
