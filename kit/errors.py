"""One exception root for the kit; every error names the bad value and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

Member = TypeVar("Member", bound=StrEnum)


class KitError(Exception):
    """Root of every error the kit raises on purpose."""


class UnknownNameError(KitError, KeyError):
    """A name (model, backend, precision, notebook...) that no registry knows."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


class UnknownValueError(UnknownNameError, ValueError):
    """A value (read from a file, or given) that is none of an enum's members; a ValueError too, as
    the enum's own lookup raises, so a reader that skips unreadable files still skips it."""


def parse_member(kind: type[Member], value: str, what: str) -> Member:
    """The member of the StrEnum `kind` whose value is `value`, else UnknownValueError naming
    `what`, the bad value and the allowed ones (`RunPrecision.parse("fp4")`: "unknown run
    precision 'fp4'; known: bf16, fp16, fp32, fp8, int8")."""
    try:
        return kind(value)
    except ValueError:
        raise UnknownValueError(what, str(value), [m.value for m in kind]) from None


class InvalidParameter(KitError, ValueError):
    """A parameter value outside what is allowed."""

    def __init__(self, name: str, value: object, allowed: str):
        self.param, self.value, self.allowed = name, value, allowed
        super().__init__(f"invalid {name}={value!r}: {allowed}")


class BackendUnavailable(KitError):
    """The backend's software or hardware is not present on this machine."""


class MissingResource(KitError, FileNotFoundError):
    """Weights, a dataset or another input file is not where the kit looks for it."""


class CorruptModel(KitError):
    """A model file that cannot be parsed or fails the ONNX checker."""


def error_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line: its type, then the first line of its message (at most `limit`
    characters), as a record of what failed keeps it.

    >>> error_line(RuntimeError("exporter crashed\\nsecond line"))
    'RuntimeError: exporter crashed'
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:limit] if text else ''}"
