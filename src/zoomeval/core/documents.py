"""The result documents (``metrics.json``, ``cover.json``, ``study.json``, a policies document, a zoom policy file),
each declared once as a :class:`Document`: its kind, schema version, fields with the form each value must have, and
the upgrades from its older versions. Every job writes one through :meth:`Document.document` and every reader reads it
through :meth:`Document.read`, which upgrades it and checks each field, refusing with one line that names the file,
the field and the form expected. A form may hold further fields (:func:`object_of`, :func:`tagged`) or items
(:func:`list_of`, :func:`tuple_of`), checked in turn and named by their path (``rule.tau``, ``views[3][1]``), and a
field's form may depend on the other fields of its object (:class:`Field`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zoomeval.core.io import read_json, write_json


@dataclass(frozen=True)
class Form:
    """What a field's value must be: a value ``accepts`` takes, described as ``expected`` in a refusal, whose parts
    ``inner`` then checks (given the value, where it was read and its name; nothing to check by default)."""

    accepts: Callable[[Any], bool]
    expected: str
    inner: Callable[[Any, str, str], None] = lambda value, where, name: None


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:  # a whole number of any size is finite (and not made a float)
    return _is_whole(value) or (isinstance(value, float) and math.isfinite(value))


def nullable(form: Form) -> Form:
    """``form``, or null."""
    return Form(
        lambda value: value is None or form.accepts(value),
        f"{form.expected} or null",
        lambda value, where, name: value is None or form.inner(value, where, name),
    )


def whole(low: int, high: int | None = None) -> Form:
    """A whole number from ``low`` (to ``high``)."""
    within = f"from {low} to {high}" if high is not None else f">= {low}"
    return Form(
        lambda value: _is_whole(value) and low <= value and (high is None or value <= high),
        f"a whole number {within}",
    )


def number(low: float = -math.inf, high: float = math.inf, expected: str = "a number") -> Form:
    """A finite number from ``low`` to ``high``."""
    return Form(lambda value: _is_number(value) and low <= value <= high, expected)


def one_of(values: Iterable[Any], expected: str | None = None) -> Form:
    """One of ``values`` (strings or whole numbers, of the same type)."""
    allowed = tuple(values)
    kinds, members = {type(v) for v in allowed}, set(allowed)
    return Form(
        lambda value: type(value) in kinds and value in members,
        expected or f"one of {', '.join(map(str, allowed))}",
    )


ANY = Form(lambda value: True, "any JSON value")
COUNT = whole(0)
PERCENT = number(0, 100, "a number from 0 to 100")
STRING = Form(lambda value: isinstance(value, str), "a string")
BOOLEAN = Form(lambda value: isinstance(value, bool), "true or false")
SHA256 = Form(
    lambda value: isinstance(value, str) and len(value) == 64 and set(value) <= set("0123456789abcdef"),
    "64 hexadecimal digits",
)
LIST = Form(lambda value: isinstance(value, list), "a list")
OBJECT = Form(lambda value: isinstance(value, dict), "an object")
#: Where a dataclass field keeps its form (:func:`checked`).
FORM = "form"


def checked(form: Form, **options: Any) -> Any:
    """A dataclass field (``dataclasses.field(**options)``) whose value a document checks against ``form``."""
    return dataclasses.field(metadata={FORM: form}, **options)


@dataclass(frozen=True)
class Field:
    """One field of a document; ``required`` False: it may be absent (read as None, and not written when None). Its
    ``form`` may be given by the object it is in (a form that depends on other fields): such a field is checked after
    those whose form is fixed, so the fields it reads are checked first."""

    name: str
    form: Form | Callable[[Mapping[str, Any]], Form] = ANY
    required: bool = True


def fields_of(cls: type) -> tuple[Field, ...]:
    """The fields of dataclass ``cls`` in its order, each with its :func:`checked` form (else any value)."""
    return tuple(Field(f.name, f.metadata.get(FORM, ANY)) for f in dataclasses.fields(cls))


class _Absent:
    """A field's value where the field is absent."""

    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


def check_value(form: Form, value: Any, where: str, name: str) -> None:
    """Refuse ``value`` (of the field ``name``, read from ``where``) unless it and its parts have their forms,
    naming the first part that does not."""
    if not form.accepts(value):
        raise ValueError(f"{where}: {name} is {_shown(value)}; expected {form.expected}")
    form.inner(value, where, name)


def check_fields(values: Mapping[str, Any], fields: Iterable[Field], where: str, prefix: str = "") -> None:
    """Refuse the first of ``fields`` whose value in ``values`` does not have its form (an optional field may be
    absent or null), naming ``where``, the field (after ``prefix``) and the form; fields of a fixed form first."""
    for field in sorted(fields, key=lambda field: not isinstance(field.form, Form)):
        value = values.get(field.name, _ABSENT)
        if (value is None or value is _ABSENT) and not field.required:
            continue
        form = field.form if isinstance(field.form, Form) else field.form(values)
        check_value(form, value, where, f"{prefix}{field.name}")


def _shown(value: Any, most: int = 80) -> str:
    """``value`` as a refusal shows it: its repr, cut short (with the number of items of a long list or object)."""
    if isinstance(value, list | dict) and len(value) > 3:
        head = repr(value[:3] if isinstance(value, list) else dict(list(value.items())[:3]))
        return f"{head[:most]}... ({len(value)} items)"
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}..."


def object_of(*fields: Field, expected: str = "an object") -> Form:
    """An object with ``fields`` (others are not read)."""
    return Form(OBJECT.accepts, expected, lambda value, where, name: check_fields(value, fields, where, f"{name}."))


def tagged(key: str, variants: Mapping[str, tuple[Field, ...]]) -> Form:
    """An object whose ``key`` names one of ``variants``: the fields it has beside ``key``."""
    tag = Field(key, one_of(variants))

    def inner(value: dict[str, Any], where: str, name: str) -> None:
        check_fields(value, (tag,), where, f"{name}.")
        check_fields(value, variants[value[key]], where, f"{name}.")

    return Form(OBJECT.accepts, f"an object whose {key} is one of {', '.join(variants)}", inner)


def list_of(item: Form, low: int = 0, high: int | None = None, unique: bool = False, what: str = "items") -> Form:
    """A list of ``low`` to ``high`` items, each of form ``item`` (``unique``: no two alike)."""
    size = f"{low}" if low == high else f"{low} to {high}" if high is not None else f"at least {low}"
    expected = f"a list of {size} {what}" + (", no two alike" if unique else "")

    def inner(value: list[Any], where: str, name: str) -> None:
        for i, part in enumerate(value):
            check_value(item, part, where, f"{name}[{i}]")
        if unique:
            first: dict[str, int] = {}
            for i, part in enumerate(value):
                if (j := first.setdefault(json.dumps(part, sort_keys=True), i)) != i:
                    raise ValueError(f"{where}: {name}[{i}] is {_shown(part)}; expected no repeat of {name}[{j}]")

    return Form(
        lambda value: isinstance(value, list) and low <= len(value) and (high is None or len(value) <= high),
        expected,
        inner,
    )


def tuple_of(*items: tuple[str, Form]) -> Form:
    """A list of one item per ``items`` (its name, its form), in order."""
    names = ", ".join(name for name, _ in items)

    def inner(value: list[Any], where: str, name: str) -> None:
        for i, (part, (_, form)) in enumerate(zip(value, items, strict=True)):
            check_value(form, part, where, f"{name}[{i}]")

    return Form(lambda value: isinstance(value, list) and len(value) == len(items), f"a list [{names}]", inner)


def schema_form(node: Mapping[str, Any]) -> Form:
    """The form a node of the config's schema (:func:`zoomeval.core.config_schema.key_schema`) gives a value: its
    enum, an integer's range, or a list of either (with its bounds on length and uniqueness)."""
    if "enum" in node:
        return one_of(node["enum"])
    if node.get("type") == "integer":
        return whole(node.get("minimum", -math.inf), node.get("maximum"))
    if node.get("type") == "array":
        unique = node.get("uniqueItems", False)
        return list_of(schema_form(node["items"]), node.get("minItems", 0), node.get("maxItems"), unique)
    raise ValueError(f"no form for the schema node {dict(node)}")


@dataclass(frozen=True)
class Upgrade:
    """What schema ``version`` changed (``what``), undone on reading an older document: fields renamed (old name:
    new name) and fields added (with the value that stands in for them)."""

    version: int
    what: str
    renamed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    added: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Document:
    """A result document: its ``name`` (in refusals), schema ``version``, ``fields`` in their written order, the
    ``kind`` it is marked with (None: unmarked), the ``upgrades`` to each version after the oldest it reads, in order,
    the version of a document without ``schema_version`` (None: refused) and the ``remedy`` a refusal gives."""

    name: str
    version: int
    fields: tuple[Field, ...]
    remedy: str
    kind: str | None = None
    upgrades: tuple[Upgrade, ...] = ()
    unversioned: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields)

    @property
    def oldest(self) -> int:
        """The oldest version read: one upgrade per version after it."""
        return self.version - len(self.upgrades)

    def with_fields(self, name: str, *fields: Field) -> Document:
        """This document with ``fields`` after its own, named ``name`` (cover.json: metrics.json and the covers)."""
        return dataclasses.replace(self, name=name, fields=self.fields + fields)

    def document(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The document of ``values`` (by field name): its kind, schema version, then each field in order."""
        unknown = sorted(values.keys() - set(self.names))
        if unknown:
            raise KeyError(f"{self.name} document: no field {unknown}")
        head = {"kind": self.kind} if self.kind else {}
        fields = {f.name: values[f.name] for f in self.fields if f.required or values.get(f.name) is not None}
        return {**head, "schema_version": self.version, **fields}

    def write(self, path: str | os.PathLike[str], values: Mapping[str, Any]) -> None:
        """Write :meth:`document` of ``values`` to ``path`` (atomically)."""
        write_json(path, self.document(values))

    def read(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """The fields (by name; None for an absent optional one) of the document ``path`` of any version read,
        upgraded to this one; fields beyond these are not read."""
        return self.upgraded(read_json(path), str(path))

    def upgraded(self, document: Any, where: str) -> dict[str, Any]:
        """The fields of ``document`` (read from ``where``), upgraded and checked; see :meth:`read`."""
        if not isinstance(document, dict):
            raise ValueError(f"{where}: not a {self.name} document (a JSON object); {self.remedy}")
        if self.kind is not None and document.get("kind") != self.kind:
            raise ValueError(f"{where}: kind is {document.get('kind')!r}; expected {self.kind!r}; {self.remedy}")
        version = document.get("schema_version", self.unversioned)
        if type(version) is not int or not self.oldest <= version <= self.version:
            known = f"{self.oldest} to {self.version}" if self.oldest < self.version else str(self.version)
            raise ValueError(
                f"{where}: {self.name} schema_version {version!r} is not one this zoomeval reads ({known}); "
                f"upgrade zoomeval or {self.remedy}"
            )
        document = dict(document)  # the caller's is not changed
        for upgrade in self.upgrades[version - self.oldest :]:
            for old, new in upgrade.renamed.items():
                if old in document:
                    document[new] = document.pop(old)
            document = {**upgrade.added, **document}
        missing = sorted(f.name for f in self.fields if f.required and f.name not in document)
        if missing:
            raise ValueError(f"{where}: no {missing}; {self.remedy}")
        check_fields(document, self.fields, where)
        return {name: document.get(name) for name in self.names}
