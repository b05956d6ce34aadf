"""A small name -> object registry used for models, backends and power samplers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from kit.errors import KitError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects; an unknown name raises an error listing the known ones.

    >>> r = Registry[int]("number")
    >>> r.register("one", 1)
    1
    >>> r.get("one")
    1
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise KitError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def decorator(self, name: str | None = None) -> Callable[[T], T]:
        """Register a function or class under `name` (default: its __name__)."""

        def wrap(item: T) -> T:
            return self.register(name or item.__name__, item)  # type: ignore[attr-defined]

        return wrap

    def unregister(self, name: str) -> T:
        """Remove and return an entry (tests register stand-ins and take them away again)."""
        if name not in self._items:
            raise UnknownNameError(self.kind, name, self._items)
        return self._items.pop(name)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items) from None

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
