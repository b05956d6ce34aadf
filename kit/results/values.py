"""Reading JSON values a run may not have written: an object, a list of objects, strings."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

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
