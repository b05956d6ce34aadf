"""Versioned JSON results: one file per run, the only thing reports and the scorecard read.

A run fills a `RunResult`'s sections as typed records (kit.results.sections, .windows, .tables)
and writes the JSON from them; a reader gets them back as the same records, after the one upgrade
of an older schema version (kit.results.schema, reading an older kit's sentences as codes in
kit.results.legacy). A reason is a code beside its sentence (kit.results.reasons). Imports only
kit.atomic and kit.errors.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kit import atomic
from kit.errors import KitError, parse_member
from kit.results.schema import (
    SCHEMA_VERSION,
    CorruptResult,
    UnreadableResult,
    UnsupportedVersion,
    upgrade,
    version_problem,
)
from kit.results.sections import BackendInfo, Environment, ModelInfo, Resources, Sections
from kit.results.tables import Tables
from kit.results.values import Record, _encoded
from kit.results.windows import AccuracyCheck, Measurement, NumericCheck

__all__ = [
    "SCHEMA_VERSION",
    "SECTIONS",
    "AccuracyCheck",
    "BackendInfo",
    "CorruptResult",
    "Environment",
    "Measurement",
    "ModelInfo",
    "NumericCheck",
    "Resources",
    "ResultKind",
    "ResultStatus",
    "RunResult",
    "SectionAsDict",
    "Sections",
    "Tables",
    "UnreadableResult",
    "UnsupportedVersion",
    "version_problem",
]


#: what every result JSON holds (RunResult's fields without a default)
REQUIRED = ("kind", "name", "parameters", "environment")


class ResultKind(StrEnum):
    """What produced a result; the value is what the JSON holds."""

    MODEL_BENCHMARK = "model_benchmark"
    C2_STUDY = "c2_study"
    SERVER_SCENARIO = "server_scenario"
    PUBLISHED_RESULTS = "published_results"
    SUMMARY = "summary"

    @property
    def notebook(self) -> str:
        """The notebook that writes this kind of result, named after the kind (as is the batch's
        one job of it, every kind but the model rows').

        >>> ResultKind.C2_STUDY.notebook
        'c2_study.ipynb'
        """
        return f"{self.value}.ipynb"


class ResultStatus(StrEnum):
    """Whether a run finished without an error; the value is what the JSON holds."""

    OK = "ok"
    ERROR = "error"

    @classmethod
    def parse(cls, value: str) -> ResultStatus:
        """The member `value` names; else UnknownValueError (a KitError) naming the allowed ones."""
        return parse_member(cls, value, "result status")


#: Each section's record; a list section holds one per entry.
SECTIONS: dict[str, type[Record]] = {
    "model": ModelInfo,
    "backend": BackendInfo,
    "environment": Environment,
    "measurements": Measurement,
    "numerics": NumericCheck,
    "accuracy": AccuracyCheck,
    "resources": Resources,
    "tables": Tables,
}
LIST_SECTIONS = ("measurements", "numerics", "accuracy")
#: The shape of each key that is no section (read as written, so checked when read).
PLAIN_SHAPES: dict[str, type] = {"parameters": dict, "errors": list, "figures": list, "notes": list}


class SectionAsDict(DeprecationWarning):
    """A section given to a RunResult as the dict it is written as, not as its record: turned into
    the record at once (the transition for older callers and tests); the kit's writers build
    records."""


def _section(name: str, value: object, *, given: bool) -> object:
    """Section `name` as its record(s): `value` as read from JSON, or `given` by a caller (a dict
    given is turned into its record, with a SectionAsDict warning)."""
    record = SECTIONS[name]
    entries = value if name in LIST_SECTIONS and isinstance(value, list | tuple) else [value]
    if given and any(isinstance(v, Mapping) for v in entries):
        warnings.warn(
            f"RunResult.{name} given as a dict: build its {record.__name__}",
            SectionAsDict,
            stacklevel=3,
        )
    if name in LIST_SECTIONS:
        return [record.of(v) for v in entries if isinstance(v, record | Mapping)]
    if value is None and name in ("model", "backend"):
        return None  # not written: the run failed first
    return value if isinstance(value, record) else record.from_dict(value)


def _read_section(name: str, value: object) -> object:
    """Section `name` as read from JSON; one its record cannot hold (a measurement without its
    batch_size, a list where an object is written, an entry of a list that is no object) raises a
    KitError naming the section and the value."""
    listed = name in LIST_SECTIONS
    entries = value if listed and isinstance(value, list) else []
    if value is not None and not isinstance(value, list if listed else Mapping):
        shown = "a list" if listed else "an object"
        raise KitError(
            f"its {name} cannot be read (a JSON {type(value).__name__}, not {shown}: "
            f"{str(value)[:80]})"
        )
    if bad := [v for v in entries if not isinstance(v, Mapping)]:
        raise KitError(f"its {name} cannot be read (an entry that is no object: {bad[0]!r:.80})")
    try:
        return _section(name, value, given=False)
    except TypeError as exc:
        raise KitError(f"its {name} cannot be read ({exc})") from None


@dataclass
class RunResult:
    """What one notebook run measured, with its provenance.

    `kind` names the study ("model_benchmark", "c2_study", "server_scenario", ...); each section is
    its record (SECTIONS: `model`, `backend`, `environment`, `resources`, and a list of records for
    `measurements`, `numerics`, `accuracy`; `tables`, every table the study wrote), the JSON written
    from them; `figures` holds the rows the scorecard compares with published values (see
    kit.publish.compare.Figure).
    """

    kind: ResultKind | str
    name: str
    _: KW_ONLY
    parameters: dict[str, Any]
    environment: Environment
    status: ResultStatus = ResultStatus.OK
    errors: list[str] = field(default_factory=list)
    model: ModelInfo | None = None
    backend: BackendInfo | None = None
    measurements: list[Measurement] = field(default_factory=list)  # BatchMeasurement.record()
    numerics: list[NumericCheck] = field(default_factory=list)
    accuracy: list[AccuracyCheck] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    tables: Tables = field(default_factory=Tables)
    notes: list[str] = field(default_factory=list)
    # peak memory: kit.measure.memory.resources()
    resources: Resources = field(default_factory=Resources)
    created_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    )
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.status = ResultStatus.parse(self.status)

    def __setattr__(self, name: str, value: object) -> None:
        if name in SECTIONS:
            value = _section(name, value, given=True)
        super().__setattr__(name, value)

    @classmethod
    def new(
        cls,
        kind: ResultKind | str,
        name: str,
        parameters: dict[str, Any],
        environment: Environment | dict[str, Any],
    ) -> RunResult:
        """A fresh result with the environment it runs in (`kit.hardware.environment.capture()`)."""
        return cls(
            kind=ResultKind(kind),
            name=name,
            parameters=parameters,
            environment=Environment.of(environment),
        )

    def fail(self, error: BaseException | str) -> None:
        self.status = ResultStatus.ERROR
        self.errors.append(error if isinstance(error, str) else f"{type(error).__name__}: {error}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written: each section from its record (`to_dict`)."""
        return {k: _encoded(getattr(self, k)) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        if not isinstance(d, dict):
            raise KitError(f"a result is a JSON object; this is a JSON {type(d).__name__}")
        if problem := version_problem(d):
            raise (UnsupportedVersion if "schema_version" in d else KitError)(problem)
        if missing := [k for k in REQUIRED if k not in d]:
            raise KitError(f"not a result: it has no {', '.join(map(repr, missing))}")
        try:
            return cls._of_result(d)
        except UnreadableResult:
            raise
        except KitError as exc:
            raise UnreadableResult(str(exc)) from None

    @classmethod
    def _of_result(cls, d: dict[str, Any]) -> RunResult:
        for key, shape in PLAIN_SHAPES.items():
            if d.get(key) is not None and not isinstance(d[key], shape):
                raise KitError(f"its {key} cannot be read (a JSON {type(d[key]).__name__})")
        fields: dict[str, Any] = {
            k: _read_section(k, v) if k in SECTIONS else v
            for k, v in upgrade(d).items()
            if k in cls.__dataclass_fields__
        }
        if fields.get("kind") in ResultKind._value2member_map_:
            fields["kind"] = ResultKind(fields["kind"])
        return cls(**fields)

    @property
    def sections(self) -> Sections:
        """The sections as records with the tables (publishing's view; None for a section not
        written).

        >>> r = RunResult.new("model_benchmark", "m", {}, {"cpu": {"model": "AMD EPYC"}})
        >>> r.sections.environment.cpu.model, r.sections.backend
        ('AMD EPYC', None)
        """
        return Sections.of(
            model=self.model,
            backend=self.backend,
            environment=self.environment,
            measurements=self.measurements,
            numerics=self.numerics,
            accuracy=self.accuracy,
            resources=self.resources,
            tables=self.tables,
        )

    def write(self, path: Path) -> Path:
        """Atomically (kit.atomic), readable by all (0644) as the HTML beside it."""
        return atomic.write_text(Path(path), json.dumps(_finite(self.to_dict()), indent=1))

    @classmethod
    def read(cls, path: Path) -> RunResult:
        """The result at `path`; a file that is not one (binary, not JSON, another schema_version)
        raises a KitError naming it. A missing file raises FileNotFoundError."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise CorruptResult(
                f"{path}: not a result JSON (not UTF-8 text: a binary file?)"
            ) from None
        except json.JSONDecodeError as exc:
            raise CorruptResult(f"{path}: not a result JSON (JSONDecodeError: {exc})") from None
        try:
            return cls.from_dict(data)
        except KitError as exc:
            # the same error, named by the file (its type kept: an UnsupportedVersion stays one;
            # an error type whose constructor takes other arguments is not built again)
            exc.args = (f"{path}: {exc}",)
            raise exc.with_traceback(None) from None


def _finite(value: object) -> object:
    """JSON has no NaN: write None instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
