"""Reading JSON values a run may not have written (an object, a list of objects, strings), and the
`Record` every section is: typed fields for what readers use, the rest kept, written back as
read."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Self

Json = Mapping[str, Any]
EMPTY: Json = MappingProxyType({})


def _map(value: object) -> Json:
    """`value` where it is a JSON object, else an empty one (None, a list: a section not
    written)."""
    return value if isinstance(value, Mapping) else EMPTY


def _rows(value: object) -> tuple[Json, ...]:
    """The JSON objects of a list (a table's rows); () where there is none."""
    return (
        tuple(r for r in value if isinstance(r, Mapping)) if isinstance(value, list | tuple) else ()
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _text(value: object) -> str:
    """A string field's value ('' for a null)."""
    return str(value or "")


#: What a reader gives for a value its field cannot hold: equal to no JSON value, so the value
#: stays in `more` (and a required field is then not given: Record.from_dict says which).
NOT_HELD = object()


def _whole(value: object) -> object:
    """A count (a batch size): an integer, never a bool, a float, a string or a null."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return value if whole else NOT_HELD


def _or(default: object) -> Callable[[object], object]:
    """Reads a value, `default` where it is null or zero (a field's reader)."""
    return lambda value: value or default


# a field's metadata: the function reading its JSON value (a nested record's from_dict)
_READ = "read"
_KEY = "key"  # a field's metadata: its JSON key, where it differs from the field's name


def _encoded(value: object) -> object:
    """`value` as JSON holds it: a record as its dict, a tuple as a list."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_encoded(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encoded(v) for k, v in value.items()}
    return value


def _same(a: object, b: object) -> bool:
    """Equal as JSON values (NaN equal to NaN: a fresh run's figure before it is written)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b  # JSON's true is no 1
    return a == b


@dataclass(frozen=True, kw_only=True)
class Record:
    """A result section (or part of one) that is written back as it was read.

    A subclass names the keys readers use as typed fields; `more` keeps every other key as written,
    so `from_dict(d).to_dict() == d` for any `d`. A value a field cannot hold as written (a null
    where the field has a default, a dict of another shape) stays in `more` and the field keeps its
    default. `layout` is the order the keys were read in (None: a record made in code, written as
    its fields, then `more`). Change one with `dataclasses.replace`.

    >>> @dataclass(frozen=True, kw_only=True)
    ... class Point(Record):
    ...     x: int = 0
    >>> p = Point.from_dict({"y": 2, "x": 1})
    >>> p.x, p.more, p.to_dict()
    (1, {'y': 2}, {'y': 2, 'x': 1})
    """

    more: Json = field(default_factory=dict)
    layout: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def named(cls) -> dict[str, Field[Any]]:
        """The JSON key of each typed field -> the field."""
        return {
            f.metadata.get(_KEY, f.name): f for f in fields(cls) if f.name not in ("more", "layout")
        }

    @classmethod
    def of(cls, value: Self | Json) -> Self:
        """`value` as a record: already one, or the dict it is written as."""
        return value if isinstance(value, cls) else cls.from_dict(value)

    @classmethod
    def from_dict(cls, d: object) -> Self:
        """The record of `d` (a JSON object; anything else reads as an empty one, nothing kept)."""
        d = _map(d)
        named, values, more = cls.named(), {}, {}
        for key, value in d.items():
            f = named.get(key)
            read = f.metadata.get(_READ) if f else None
            typed = read(value) if read else value
            if f is not None and _same(_encoded(typed), value):
                values[f.name] = typed
            else:
                more[key] = value
        if unheld := [k for k in more if k in named and _required(named[k])]:
            raise TypeError(f"{cls.__name__}: {unheld[0]}={more[unheld[0]]!r} cannot be read")
        return cls(**values, more=more, layout=tuple(d))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object this record stands for: its keys in the order read, each field's value
        (a field still at its default gives way to the value `more` kept for its key)."""
        named = self.named()
        keys = list(self.layout if self.layout is not None else named)
        keys += [k for k in named if k not in keys and self._changed(named[k])] + [
            k for k in self.more if k not in keys
        ]
        out: dict[str, Any] = {}
        for key in keys:
            f = named.get(key)
            if f is not None and (key not in self.more or self._changed(f)):
                out[key] = _encoded(getattr(self, f.name))
            elif key in self.more:
                out[key] = self.more[key]
        return out

    def _changed(self, f: Field[Any]) -> bool:
        """Whether field `f` holds other than its default."""
        if _required(f):
            return True  # a required field is always written
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        return not _same(getattr(self, f.name), default)


def _required(f: Field[Any]) -> bool:
    """Whether field `f` has no default (a record cannot be made without it)."""
    return f.default is MISSING and f.default_factory is MISSING
