"""Versioned JSON results: one file per run, the only thing reports and the scorecard read.

A run fills a `RunResult`'s sections as dicts and writes it; a reader gets each section back as a
typed record (`RunResult.sections`: kit.results.sections, .windows, .tables), after the one upgrade
of an older schema version (kit.results.schema, reading an older kit's sentences as codes in
kit.results.legacy). A reason is a code beside its sentence (kit.results.reasons). Imports only
kit.atomic and kit.errors.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kit import atomic
from kit.errors import KitError, parse_member
from kit.results.schema import SCHEMA_VERSION, UnsupportedVersion, upgrade, version_problem
from kit.results.sections import Sections

__all__ = [
    "SCHEMA_VERSION",
    "ResultKind",
    "ResultStatus",
    "RunResult",
    "Sections",
    "UnsupportedVersion",
    "version_problem",
]


class ResultKind(StrEnum):
    """What produced a result; the value is what the JSON holds."""

    MODEL_BENCHMARK = "model_benchmark"
    C2_STUDY = "c2_study"
    SERVER_SCENARIO = "server_scenario"
    PUBLISHED_RESULTS = "published_results"
    SUMMARY = "summary"


class ResultStatus(StrEnum):
    """Whether a run finished without an error; the value is what the JSON holds."""

    OK = "ok"
    ERROR = "error"

    @classmethod
    def parse(cls, value: str) -> ResultStatus:
        """The member `value` names; else UnknownValueError (a KitError) naming the allowed ones."""
        return parse_member(cls, value, "result status")


@dataclass
class RunResult:
    """What one notebook run measured, with its provenance.

    `kind` names the study ("model_benchmark", "c2_study", "server_scenario", ...); `figures`
    holds the rows the scorecard compares with published values (see kit.publish.compare.Figure);
    `tables` holds study-specific tables as lists of records.
    """

    kind: ResultKind | str
    name: str
    _: KW_ONLY
    parameters: dict[str, Any]
    environment: dict[str, Any]
    status: ResultStatus = ResultStatus.OK
    errors: list[str] = field(default_factory=list)
    model: dict[str, Any] | None = None
    backend: dict[str, Any] | None = None
    measurements: list[dict[str, Any]] = field(default_factory=list)  # BatchMeasurement.to_dict()
    numerics: list[dict[str, Any]] = field(default_factory=list)
    accuracy: list[dict[str, Any]] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # peak memory: kit.measure.memory.resources()
    resources: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    )
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.status = ResultStatus.parse(self.status)

    @classmethod
    def new(
        cls,
        kind: ResultKind | str,
        name: str,
        parameters: dict[str, Any],
        environment: dict[str, Any],
    ) -> RunResult:
        """A fresh result with the environment it runs in (`kit.hardware.environment.capture()`)."""
        return cls(kind=ResultKind(kind), name=name, parameters=parameters, environment=environment)

    def fail(self, error: BaseException | str) -> None:
        self.status = ResultStatus.ERROR
        self.errors.append(error if isinstance(error, str) else f"{type(error).__name__}: {error}")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        if not isinstance(d, dict):
            raise KitError(f"a result is a JSON object; this is a JSON {type(d).__name__}")
        if problem := version_problem(d):
            raise (UnsupportedVersion if "schema_version" in d else KitError)(problem)
        fields = {k: v for k, v in upgrade(d).items() if k in cls.__dataclass_fields__}
        if fields.get("kind") in ResultKind._value2member_map_:
            fields["kind"] = ResultKind(fields["kind"])
        return cls(**fields)

    @property
    def sections(self) -> Sections:
        """The sections as typed records, read from the dicts the run wrote (publishing's view).

        >>> r = RunResult.new("model_benchmark", "m", {}, {"cpu": {"model": "AMD EPYC"}})
        >>> r.sections.environment.cpu.model, r.sections.backend
        ('AMD EPYC', None)
        """
        return Sections(
            model=self.model,
            backend=self.backend,
            environment=self.environment,
            measurements=self.measurements,
            numerics=self.numerics,
            accuracy=self.accuracy,
            tables=self.tables,
            resources=self.resources,
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
            raise KitError(f"{path}: not a result JSON (not UTF-8 text: a binary file?)") from None
        except json.JSONDecodeError as exc:
            raise KitError(f"{path}: not a result JSON (JSONDecodeError: {exc})") from None
        try:
            return cls.from_dict(data)
        except KitError as exc:
            raise type(exc)(f"{path}: {exc}") from None


def _finite(value: object) -> object:
    """JSON has no NaN: write None instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
