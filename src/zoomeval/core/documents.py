"""The result documents (``metrics.json``, ``cover.json``, ``study.json``, a policies document), each declared once
as a :class:`Document`: its kind, schema version, fields with the form each value must have, and the upgrades from
its older versions. Every job writes one through :meth:`Document.document` and every reader reads it through
:meth:`Document.read`, which upgrades it and checks each field, refusing with one line that names the file, the
field and the form expected."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zoomeval.core.io import read_json, write_json


@dataclass(frozen=True)
class Form:
    """What a field's value must be: a value ``accepts`` takes, described as ``expected`` in a refusal."""

    accepts: Callable[[Any], bool]
    expected: str


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def nullable(form: Form) -> Form:
    """``form``, or null."""
    return Form(lambda value: value is None or form.accepts(value), f"{form.expected} or null")


ANY = Form(lambda value: True, "any JSON value")
COUNT = Form(lambda value: _is_number(value) and isinstance(value, int) and value >= 0, "a whole number >= 0")
PERCENT = Form(lambda value: _is_number(value) and 0 <= value <= 100, "a number from 0 to 100")
STRING = Form(lambda value: isinstance(value, str), "a string")
LIST = Form(lambda value: isinstance(value, list), "a list")
#: Where a dataclass field keeps its form (:func:`checked`).
FORM = "form"


def checked(form: Form, **options: Any) -> Any:
    """A dataclass field (``dataclasses.field(**options)``) whose value a document checks against ``form``."""
    return dataclasses.field(metadata={FORM: form}, **options)


@dataclass(frozen=True)
class Field:
    """One field of a document; ``required`` False: it may be absent (read as None, and not written when None)."""

    name: str
    form: Form = ANY
    required: bool = True


def fields_of(cls: type) -> tuple[Field, ...]:
    """The fields of dataclass ``cls`` in its order, each with its :func:`checked` form (else any value)."""
    return tuple(Field(f.name, f.metadata.get(FORM, ANY)) for f in dataclasses.fields(cls))


def check_fields(values: Mapping[str, Any], fields: Iterable[Field], where: str, prefix: str = "") -> None:
    """Refuse the first of ``fields`` whose value in ``values`` (None where absent) does not have its form, naming
    ``where``, the field (after ``prefix``) and the form."""
    for field in fields:
        value = values.get(field.name)
        if not field.form.accepts(value) and (field.required or value is not None):
            raise ValueError(f"{where}: {prefix}{field.name} is {value!r}; expected {field.form.expected}")


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
