"""The study contract: a validated config dataclass in, a RunResult out, never an exception for a
measurement failure, sessions always closed.

A study module defines `Config(StudyConfig)` and `execute(config, result)`; `run_study` does the
rest: it builds the config from plain parameters (a notebook's namespace, a job's parameters),
turns a bad parameter or a failed measurement into the result's status and errors, and records
the config with its defaults filled in.
"""

from __future__ import annotations

import dataclasses
import functools
import traceback
import typing
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from pydantic import ConfigDict, TypeAdapter, ValidationError

from kit.backends import Placement
from kit.errors import InvalidParameter, KitError
from kit.hardware.environment import capture
from kit.hardware.kinds import device_kind
from kit.measure.memory import resources, steady_allocator
from kit.measure.time_account import accounting
from kit.models.requests import ExportRequest
from kit.results import Environment, ResultKind, RunResult
from kit.search.ahead import CompileRequest

C = TypeVar("C", bound="StudyConfig")


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    """Base of every study's config: typed fields, checked on creation and when built from
    parameters.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Demo(StudyConfig):
    ...     sizes: tuple[int, ...] = (1,)
    >>> Demo.from_params({"sizes": [2, 4], "other": "ignored"}).sizes
    (2, 4)
    """

    #: Names a notebook namespace or a job may carry that are not config fields.
    passthrough: ClassVar[tuple[str, ...]] = ("results_path",)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce(f.name, getattr(self, f.name), hints[f.name]))

    @classmethod
    def from_params(cls: type[C], params: Mapping[str, Any]) -> C:
        """The config from the fields found in `params` (a dict, or a notebook's globals());
        names that are not fields are left out, as papermill leaves unknown names alone."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def exports(self) -> list[ExportRequest]:
        """The zoo exports a run of this config loads: a batch makes the ones not cached yet side
        by side before its first timed job (kit.batch.prepare)."""
        return []

    def compiles(self) -> list[CompileRequest]:
        """The torch.compile candidates a run of this config's searches will probe: a batch
        compiles them side by side before its first timed job (kit.search.ahead)."""
        return []


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunsOnBackend(StudyConfig):
    """The fields of a study that runs a model on a backend: the precision plan.

    `precision_note` says why this backend/precision stands in for the published precision; the
    batch fills it in from kit.search.precision_map, a hand-made run says so instead.
    """

    backend: str = "onnxruntime"
    precision: str = "fp32"
    device: str = "cpu"  # cpu, cuda, tensorrt, ipu (kit.hardware.kinds.DEVICES)
    precision_note: str = ""
    hardware: str = ""  # the kind the batch resolved (cpu, cuda, ipu); "": the kind of `device`

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "hardware", device_kind(self.device, self.hardware))
        self.placement().backend_config(kind=self.hardware)  # the backend, its options and threads

    def placement(self) -> Placement:
        """What runs where (kit.backends.placement); a study with threads or options adds them."""
        return Placement.of(self.backend, self.precision, self.device)

    def note(self) -> str:
        return self.precision_note or (
            f"{self.backend} {self.precision} on {self.device}, as given in the "
            "parameters (not chosen by the published-precision mapping)"
        )


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


#: pydantic's strict mode: no strings read as numbers, no floats as ints, no bools as ints; NaN and
#: infinity are not numbers a study can run with.
STRICT = ConfigDict(strict=True, allow_inf_nan=False)
#: How an error names what is allowed, by pydantic's error type.
ALLOWED = {
    "int_type": "an integer",
    "bool_type": "True or False",
    "string_type": "a string",
    "float_type": "a number",
    "finite_number": "a finite number",
    "dict_type": "a dict",
    "list_type": "a list",
    "tuple_type": "a list",
}


@functools.cache
def _adapter(hint: Any) -> TypeAdapter:
    return TypeAdapter(hint, config=STRICT)


def coerce(name: str, value: Any, hint: Any) -> Any:
    """`value` checked against the type hint `hint` by pydantic's strict validation; lists become
    tuples where a tuple is due (papermill and JSON give lists).

    Raises InvalidParameter naming the parameter, the offending value and what it needs.

    >>> coerce("batch_sizes", [1, 2], tuple[int, ...])
    (1, 2)
    """
    try:
        return _adapter(hint).validate_python(_as_tuples(value, hint))
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidParameter(name, error["input"], _allowed(error["type"], hint)) from None


def _as_tuples(value: Any, hint: Any) -> Any:
    if typing.get_origin(hint) is not tuple:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (value,)  # one batch size given as a number
    if isinstance(value, list | tuple):
        item = typing.get_args(hint)[0]
        return tuple(_as_tuples(v, item) for v in value)
    return value


def _allowed(error_type: str, hint: Any) -> str:
    if error_type in ("tuple_type", "list_type") and typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        names = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}
        return f"a list of {names.get(item, 'lists')}"
    return ALLOWED.get(error_type, f"a value of type {hint}")


def run_study(
    kind: ResultKind,
    config_cls: type[C],
    config: C | Mapping[str, Any],
    execute: Callable[[C, RunResult], None],
    name: Callable[[dict], str],
) -> RunResult:
    """Validate, execute and record one study run; every failure ends up in the result."""
    # before anything is loaded: figures independent of process history
    allocator = steady_allocator()
    params = config.to_dict() if isinstance(config, StudyConfig) else dict(config)
    params = {k: v for k, v in params.items() if k not in config_cls.passthrough}
    result = RunResult.new(
        kind,
        str(name(params)),
        params,
        Environment.from_dict({**capture(), "allocator": allocator}),
    )
    try:
        # unknown names: TypeError
        cfg = config if isinstance(config, config_cls) else config_cls(**params)
        result.parameters = cfg.to_dict()
        with accounting() as account:
            try:
                execute(cfg, result)
            finally:  # a failed study still says where its time went
                result.tables = result.tables.with_table("time_account", account.to_dict())
    except KitError as exc:
        result.fail(exc)
    except TypeError as exc:  # a parameter name the config does not have
        result.fail(
            InvalidParameter("parameters", sorted(set(params) - _field_names(config_cls)), str(exc))
        )
    except Exception as exc:  # noqa: BLE001 - a bug still ends as a readable result, not a lost run
        result.fail(
            f"{type(exc).__name__}: {exc} (unexpected; traceback: "
            f"{' | '.join(traceback.format_exc().strip().splitlines()[-4:])})"
        )
    result.resources = resources()
    return result


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@contextmanager
def closing_all(sessions: list):
    """Close every session (each at most once) when the block ends, however it ends."""
    try:
        yield sessions
    finally:
        seen = set()
        for s in sessions:
            if s is not None and id(s) not in seen:
                seen.add(id(s))
                s.close()
