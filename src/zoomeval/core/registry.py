"""A registry of named extensions, in the style of timm's ``@register_model``.

Each extension point (dataset adapters, model sources, label sets) keeps one :class:`Registry` of entries of its
own frozen dataclass, whose first two fields are the name and the decorated function, the rest what the
extension declares about itself::

    ADAPTERS = Registry("dataset adapter", Adapter)

    @ADAPTERS.register("imagenet_v2", required=("root",))
    def imagenet_v2(root: Path) -> Adapted: ...

The registry is a read-only mapping from names to entries, in registration order. Whatever needs to know the
extensions (the config checks, the workflow's rules) reads them from the registry, never from a list of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

E = TypeVar("E")
F = TypeVar("F", bound=Callable[..., Any])


class Registry(Mapping[str, E], Generic[E]):
    """Entries of one kind by name; ``make(name, function, **declared)`` builds an entry."""

    def __init__(self, kind: str, make: Callable[..., E]) -> None:
        self.kind = kind
        self._make = make
        self._entries: dict[str, E] = {}

    def register(self, name: str, **declared: Any) -> Callable[[F], F]:
        """Decorator: register the function as entry ``name`` with the ``declared`` attributes."""

        def add(function: F) -> F:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = self._make(name, function, **declared)
            return function

        return add

    def get(self, name: str) -> E:  # type: ignore[override]
        """The entry ``name``; an unknown name is refused with the registered ones."""
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; expected one of {list(self._entries)}") from None

    def __getitem__(self, name: str) -> E:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
