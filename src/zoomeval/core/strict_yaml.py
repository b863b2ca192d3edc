"""YAML read strictly: a key given twice in one mapping is refused, naming the key, the file and both lines.

PyYAML's ``safe_load`` (and Snakemake's config loader) silently keep the last of two equal keys, so a config that
gives ``scales:`` twice would run with whichever comes last. Every YAML file the package reads goes through
:func:`load_yaml`; the workflow re-reads its config files with it before validating the config
(``workflow/rules/common.smk``). Merge keys (``<<: *base``) may still be overridden by the mapping's own keys.

Nothing in a file is code or a way to make work without bound: a ``__use_yte__`` key (at any level), which asks
Snakemake to render the file with YTE, evaluating its ``?`` expressions as Python, is refused naming the file and
line (:func:`refuse_templating`, which the Snakefiles call before their ``configfile:`` directive, where Snakemake
would render it), and so is a document whose nodes, every alias counted as the whole node it names, number more
than :data:`MAX_NODES` (an alias "bomb": nine nested levels of ten aliases are 10^9 nodes in a few hundred bytes).
The count is made on the composed node graph, each node once, before anything is constructed: linear in the file.

Whatever else a file holds is refused in one line naming it (and the line, where the parser gives one): a syntax
error, a tag that names a Python object (``!!python/object/apply``: the safe loader constructs no such thing), a
file over :data:`MAX_BYTES` (refused before it is read) and nesting deeper than :data:`MAX_DEPTH` (counted on the
parser's events, which recurse no deeper, before the composer, which would). :func:`load_config_file` also refuses a
document that is not a mapping of keys (a list, a scalar, an empty file).
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from zoomeval.core.config import ConfigError

#: The most nodes (scalars, lists, mappings; an alias counts as the nodes it names) a document may have. The largest
#: config zoomeval ships (config/paper.yaml) has under 500; a list of 50,000 dataset files would still fit.
MAX_NODES = 100_000
#: The largest YAML file read, in bytes: a config is a few kilobytes (config/paper.yaml under 10 KB); the config
#: schema, the largest file the package reads, under 100 KB.
MAX_BYTES = 1_000_000
#: The deepest nesting of lists and mappings a document may have (a config nests five levels).
MAX_DEPTH = 100
#: The key that makes Snakemake render a config file as a YTE template (Python expressions).
YTE_KEY = "__use_yte__"


class DuplicateKeyError(ConfigError):
    """A mapping of a YAML file gives one key twice."""


class UnsafeYamlError(ConfigError):
    """A YAML file asks for templating, or expands past :data:`MAX_NODES` nodes."""


def _expanded_size(root: yaml.Node, name: str) -> int:
    """The nodes of ``root`` with every alias expanded, counted without expanding (each node once); refuses past
    :data:`MAX_NODES` and a recursive alias (a node that contains itself)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes and sizes[id(node)] >= 0:
            continue
        children = _children(node)
        if children_done:
            sizes[id(node)] = total = 1 + sum(sizes[id(child)] for child in children)
            if total > MAX_NODES:
                raise UnsafeYamlError(
                    f"{name}: the document expands to more than {MAX_NODES:,} nodes (aliases counted in full); "
                    "a config needs far fewer: remove the repeated aliases"
                )
            continue
        if sizes.get(id(node)) == -1:
            line = node.start_mark.line + 1
            raise UnsafeYamlError(f"{name}: line {line}: a recursive alias (a node that contains itself); write it out")
        sizes[id(node)] = -1  # in progress
        stack.append((node, True))
        stack.extend((child, False) for child in children if sizes.get(id(child), -1) < 0)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


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
            if key == YTE_KEY:
                raise UnsafeYamlError(
                    f"{key_node.start_mark.name}: line {line}: {YTE_KEY} asks Snakemake to run the file's "
                    "?-expressions as Python; zoomeval configs take plain values: remove it"
                )
            if key in seen:
                raise DuplicateKeyError(
                    f"{key_node.start_mark.name}: key {key!r} is given twice, on lines {seen[key]} and {line}; "
                    "keep one (YAML would silently use the last)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _refuse_depth(text: str, name: str) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` (from the parser's events: no recursion)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeYamlError(
                    f"{name}: line {event.start_mark.line + 1}: lists and mappings nested more "
                    f"than {MAX_DEPTH} deep; a config nests a few levels"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _yaml_refusal(error: yaml.YAMLError, name: str) -> ConfigError:
    """A parser's or constructor's error as one line: the file, the line and what is wrong."""
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(error, "problem", None) or str(error)
    if "constructor for the tag" in what:
        what += " (a config holds plain values: no tag names Python code)"
    return ConfigError(f"{name}: {where}{' '.join(what.split())}; not a YAML file zoomeval reads")


def loads_yaml(text: str, name: str = "<string>") -> Any:
    """The document in ``text`` (``name``: the file it came from, for messages); refuses a syntax error, a tag
    the safe loader has no constructor for, nesting deeper than :data:`MAX_DEPTH`, duplicate keys, a
    ``__use_yte__`` key and a document of more than :data:`MAX_NODES` nodes (aliases expanded), one line each."""
    loader = _StrictLoader(text)
    loader.name = name
    try:
        _refuse_depth(text, name)
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, name)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise _yaml_refusal(error, name) from None
    finally:
        loader.dispose()


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """The YAML (or JSON) document in the file ``path``, refused unread above :data:`MAX_BYTES`; refuses
    what :func:`loads_yaml` refuses, naming the file."""
    if (size := Path(path).stat().st_size) > MAX_BYTES:
        raise UnsafeYamlError(
            f"{path}: {size:,} bytes, more than the {MAX_BYTES:,} a YAML file zoomeval reads may "
            "have (a config is a few kilobytes)"
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: byte {error.start} is not UTF-8; save the file as UTF-8 text") from None
    return loads_yaml(text, str(path))


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A config file's mapping of keys, read by :func:`load_yaml`; a document that is no mapping (a list, a
    scalar, an empty file) is refused naming the file."""
    config = load_yaml(path)
    if not isinstance(config, dict):
        what = "empty" if config is None else f"{'a list' if isinstance(config, list) else 'one value'}, not a mapping"
        raise ConfigError(f"{path}: the config is {what}; a config maps keys to values (scales: ..., datasets: ...)")
    return config


def check_config_file(path: str | os.PathLike[str]) -> None:
    """The workflow's config file read by :func:`load_config_file` before Snakemake loads it (which would render
    a ``__use_yte__`` template, expand an alias bomb, and stop at the rest with a traceback): the Snakefiles call it
    before their ``configfile:`` directive. A missing file is left to Snakemake's own message."""
    if Path(path).is_file():
        load_config_file(path)


def refuse_templating(path: str | os.PathLike[str]) -> None:
    """Read a config file strictly (:func:`load_yaml`) before Snakemake loads it, which would render a file with
    ``__use_yte__`` (running its expressions) and expand an alias bomb: ``zoomeval run`` reads the study's profile
    so, and study Snakefiles written before :func:`check_config_file` their config. A missing file is left to
    Snakemake's own message."""
    if Path(path).is_file():
        load_yaml(path)
