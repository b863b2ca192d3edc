"""The paper's published results (``published.yaml`` beside this module: Table 1 and the ImageNet-Hard card), read
strictly, and matched to a study's results: a published table stands beside a result whose protocol is its own
(the dataset's adapter and image count, label set, variant, class set and, for Table 1, the paper's 36 scales in
its order and top-36), and a published row beside the result of a model that reproduces it (the same source,
architecture and weights).

The match reads what the result records: the adapter is the prediction file's (``dataset_adapter``, sealed with
it; results computed before zoomeval 0.2.0 record none and match nothing) and the image count is the scored one,
so a limited run or a dataset with images left out as bad matches nothing. It cannot tell the paper's images from
another set of the same adapter and count (a modified copy of ImageNet val): the numbers beside it are the paper's,
never recomputed, and never ranked, sealed or audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from zoomeval.core.strict_yaml import loads_yaml

#: The data file's schema version this module reads.
SCHEMA_VERSION = 1
#: The accuracies a published table may give (the leaderboard's).
METRICS = ("acc_standard", "acc_1crop", "acc_top_k", "acc_max")
#: The protocol fields a published table states; ``grid`` and ``top_k`` are optional (any grid).
PROTOCOL = ("adapter", "n_images", "label_set", "variant", "class_set", "grid", "top_k")
#: A model that reproduces a published row: (source, architecture, weights).
Weights = tuple[str, str, str]


@dataclass(frozen=True)
class Protocol:
    """What a result must have for a published table to stand beside it."""

    adapter: str
    n_images: int
    label_set: str
    variant: str
    class_set: str  # ``full`` or ``subset of N classes``
    scales: tuple[int, ...] | None = None
    top_k: int | None = None

    def matches(self, key: dict[str, Any], n_images: int, adapter: str | None) -> bool:
        """Whether a result of comparability ``key``, ``n_images`` scored and its dataset's ``adapter`` is of this
        protocol (a subset class set by its class count, its digest being the dataset's own)."""
        class_set = str(key.get("class_set"))
        return (
            adapter == self.adapter
            and n_images == self.n_images
            and (key.get("label_set"), key.get("variant")) == (self.label_set, self.variant)
            and (class_set == self.class_set or class_set.startswith(f"{self.class_set} ("))
            and (self.scales is None or tuple(key.get("scales") or ()) == self.scales)
            and (self.top_k is None or key.get("top_k") == self.top_k)
        )


@dataclass(frozen=True)
class PublishedRow:
    """A published model's values in one table."""

    name: str
    models: frozenset[Weights]
    values: dict[str, float]
    note: str = ""


@dataclass(frozen=True)
class PublishedTable:
    """A published table's column: its ``source`` (``paper, Table 1``), ``column`` (``IN``), protocol and rows."""

    source: str
    column: str
    protocol: Protocol
    rows: tuple[PublishedRow, ...]

    def row_of(self, weights: Weights) -> PublishedRow | None:
        """The published row that ``weights`` reproduce (None: none)."""
        return next((row for row in self.rows if weights in row.models), None)


@cache
def published() -> tuple[PublishedTable, ...]:
    """The tables of ``published.yaml``, read once per process; a malformed file is refused naming the key."""
    text = (resources.files("zoomeval.report") / "published.yaml").read_text(encoding="utf-8")
    return parse(loads_yaml(text, "published.yaml"))


def parse(document: Any) -> tuple[PublishedTable, ...]:
    """The tables of a published-results document (the data file's structure, above), every key checked."""
    where = "published.yaml"
    _keys(document, {"schema_version", "grids", "models", "tables"}, where)
    if document["schema_version"] != SCHEMA_VERSION:
        raise ValueError(
            f"{where}: schema_version {document['schema_version']!r}; this zoomeval reads {SCHEMA_VERSION}"
        )
    grids = {name: _ints(scales, f"{where}: grids.{name}") for name, scales in _mapping(document["grids"], where)}
    models = {
        name: _weights(entries, f"{where}: models.{name}") for name, entries in _mapping(document["models"], where)
    }
    if not isinstance(document["tables"], list):
        raise ValueError(f"{where}: tables is not a list")
    return tuple(_table(t, f"{where}: tables[{i}]", grids, models) for i, t in enumerate(document["tables"]))


def _table(table: Any, where: str, grids: dict, models: dict) -> PublishedTable:
    _keys(table, {"source", "column", "protocol", "metrics", "rows"}, where)
    protocol = table["protocol"]
    _keys(protocol, set(PROTOCOL[:5]), f"{where}.protocol", optional={"grid", "top_k"})
    if protocol.get("grid") is not None and protocol["grid"] not in grids:
        raise ValueError(f"{where}.protocol.grid: {protocol['grid']!r} is not one of grids {list(grids)}")
    metrics = table["metrics"]
    if not (isinstance(metrics, list) and metrics and set(metrics) <= set(METRICS)):
        raise ValueError(f"{where}.metrics: expected a list of {list(METRICS)}")
    rows = []
    for i, row in enumerate(table["rows"] if isinstance(table["rows"], list) else ()):
        at = f"{where}.rows[{i}]"
        _keys(row, {"name", "models", "values"}, at, optional={"note"})
        values = row["values"]
        if not (isinstance(values, list) and len(values) == len(metrics)):
            raise ValueError(f"{at}.values: expected one number per metric {metrics}")
        if not all(isinstance(v, int | float) and 0 <= v <= 100 for v in values):
            raise ValueError(f"{at}.values: expected percentages from 0 to 100")
        if row["models"] not in models:
            raise ValueError(f"{at}.models: {row['models']!r} is not one of models {list(models)}")
        values = {m: float(v) for m, v in zip(metrics, values, strict=True)}
        rows.append(PublishedRow(str(row["name"]), models[row["models"]], values, str(row.get("note", ""))))
    scales = grids[protocol["grid"]] if protocol.get("grid") is not None else None
    fields = {k: protocol[k] for k in PROTOCOL[:5]} | {"scales": scales, "top_k": protocol.get("top_k")}
    return PublishedTable(str(table["source"]), str(table["column"]), Protocol(**fields), tuple(rows))


def _keys(value: Any, required: set[str], where: str, optional: set[str] = frozenset()) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping")
    if missing := sorted(required - value.keys()):
        raise ValueError(f"{where}: missing {missing}")
    if unknown := sorted(value.keys() - required - optional):
        raise ValueError(f"{where}: unknown key(s) {unknown}")


def _mapping(value: Any, where: str) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping")
    return list(value.items())


def _ints(value: Any, where: str) -> tuple[int, ...]:
    if not (isinstance(value, list) and value and all(type(v) is int and v > 0 for v in value)):
        raise ValueError(f"{where}: expected a list of whole numbers > 0")
    return tuple(value)


def _weights(value: Any, where: str) -> frozenset[Weights]:
    if not (isinstance(value, list) and value and all(isinstance(w, list) and len(w) == 3 for w in value)):
        raise ValueError(f"{where}: expected a list of [source, architecture, weights]")
    return frozenset(tuple(str(part) for part in w) for w in value)


def published_table(key: dict[str, Any], n_images: int, adapter: str | None) -> PublishedTable | None:
    """The published table of a result's protocol (None: the paper published none for it)."""
    return next((t for t in published() if t.protocol.matches(key, n_images, adapter)), None)
