"""A result's tables as one record (`RunResult.tables`): each table the kit writes and a reader
reads by field is a tuple of row records (C2 rows, roofline rows, peaks, search probes, the
search's decisions, failed batches, the time account); a study-specific table no reader needs by
field (the C2 paper's tables, the server study's, the operator breakdown's other keys, a summary's
scorecard) is kept as the JSON rows it is shown as. A table written differently from the rows
this kit reads stays in `more`, written back as read (see kit.results.values.Record).

A study changes its tables through the record: `result.tables = result.tables.with_table("roofline",
rows)`, or `.adding("c2", row)`; a table is never changed in place.

>>> t = Tables().adding("failed_batches", {"batch_size": 4, "error": "oom"})
>>> t.failed(4), t.to_dict()
('oom', {'failed_batches': [{'batch_size': 4, 'error': 'oom'}]})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kit.results.reasons import Reason, reason_code
from kit.results.values import _READ, Json, Record, _encoded, _map, _same, _text, _whole

C2_FIGURES = ("latency_ms", "throughput", "efficiency")

R = TypeVar("R", bound=Record)


#: What a table's reader gives for a value that is not its table: never equal to the value read,
#: so the value stays in `more`, as written.
UNREAD = object()


def _table(row: type[R]) -> Callable[[object], object]:
    """Reads a table's rows as `row` records (UNREAD where one is not a row this kit reads)."""

    def read(value: object) -> object:
        try:
            return tuple(row.from_dict(r) for r in value) if isinstance(value, list) else UNREAD
        except (TypeError, KeyError, ValueError):
            return UNREAD

    return read


def _json_rows(value: object) -> object:
    """A table kept as its JSON rows (objects); UNREAD where it is not a list of them."""
    rows = value if isinstance(value, list) else [None]
    return tuple(rows) if all(isinstance(r, Mapping) for r in rows) else UNREAD


def _one(row: type[R]) -> Callable[[object], object]:
    """Reads a one-row table (an object) as a `row` record; UNREAD where it is not one."""

    def read(value: object) -> object:
        try:
            return row.from_dict(value) if isinstance(value, Mapping) else UNREAD
        except (TypeError, KeyError, ValueError):
            return UNREAD

    return read


@dataclass(frozen=True, kw_only=True)
class C2Row(Record):
    """One batch size of the C2 study's tables 1-3, or why a figure of it is missing: each figure
    `<key>` may have a `<key>_reason` (why it was not measured), its `<key>_reason_code` and a
    `<key>_indicative` (why it is indicative only)."""

    batch_size: int = field(metadata={_READ: _whole})  # a null or "4" is no batch size
    latency_ms: float | None = None
    throughput: float | None = None
    efficiency: float | None = None
    power_sensor: str | None = None
    latency_ms_reason: str = field(default="", metadata={_READ: _text})
    throughput_reason: str = field(default="", metadata={_READ: _text})
    efficiency_reason: str = field(default="", metadata={_READ: _text})
    latency_ms_reason_code: str | None = None
    throughput_reason_code: str | None = None
    efficiency_reason_code: str | None = None
    latency_ms_indicative: str = field(default="", metadata={_READ: _text})
    throughput_indicative: str = field(default="", metadata={_READ: _text})
    efficiency_indicative: str = field(default="", metadata={_READ: _text})

    def figure(self, key: str) -> float | None:
        """A figure by its key ('latency_ms', 'throughput', 'efficiency')."""
        value: float | None = getattr(self, C2_FIGURES[C2_FIGURES.index(key)])
        return value

    def reason_for(self, key: str) -> str:
        """Why figure `key` was not measured ('' where it was, or no reason was written)."""
        return str(getattr(self, f"{self._key(key)}_reason"))

    def reason_of(self, key: str) -> Reason:
        """Why figure `key` was not measured, with the code the study wrote beside it (OTHER where
        it wrote none: a reason said by its sentence)."""
        return Reason(self.reason_for(key), reason_code(getattr(self, f"{key}_reason_code")))

    def indicative_for(self, key: str) -> str:
        """Why figure `key` is indicative only ('' where its power window was resolved)."""
        return str(getattr(self, f"{self._key(key)}_indicative"))

    @property
    def reasons(self) -> dict[str, str]:
        """Figure key -> why it was not measured, for the figures that have a reason."""
        return {k: self.reason_for(k) for k in C2_FIGURES if self.reason_for(k)}

    @staticmethod
    def _key(key: str) -> str:
        return C2_FIGURES[C2_FIGURES.index(key)]  # a ValueError for a key that is no figure


@dataclass(frozen=True, kw_only=True)
class RooflineRow(Record):
    """One figure's roofline position (`kit.studies` roofline rows)."""

    batch_size: int
    precision: str | None = None
    flops_per_sample: float | None = None
    bytes_per_sample: float | None = None
    intensity_flop_per_byte: float | None = None
    ridge_flop_per_byte: float | None = None
    bound: str | None = None
    attainable_gflops: float | None = None
    achieved_gflops: float | None = None
    fraction_of_bound: float | None = None
    far_below: bool | None = None
    above_bound: bool = False
    peak_gflops: float | None = None
    peak_unit: str | None = None
    bandwidth_gbs: float | None = None
    bandwidth_method: str = ""
    bytes_method: str = ""
    unresolved_tensors: int = 0
    matrix_time_share: float | None = None
    matrix_fraction_of_peak: float | None = None
    below_peak_reason: str = field(default="", metadata={_READ: _text})


@dataclass(frozen=True, kw_only=True)
class PeakRow(Record):
    """The device's nominal peak at one precision (int8 in GOPS), with how it was found."""

    precision: str | None = None
    gflops: float | None = None
    unit: str | None = None
    native: bool | None = None
    method: str | None = None
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class SearchProbe(Record):
    """One candidate of the per-row search (`kit.search.probe.Probe.to_dict()`), as shown."""

    label: str
    status: str | None = None
    throughput: float | None = None
    low: float | None = None
    high: float | None = None
    today: bool = False  # today's mapping of the published precision
    load_s: float | None = None
    numerics: Json = field(default_factory=dict, metadata={_READ: _map})
    reason: str = field(default="", metadata={_READ: _text})  # why it lost, or that it was chosen
    why: str = field(default="", metadata={_READ: _text})  # `reason`, as an older kit named it

    @property
    def because(self) -> str:
        """Why it lost, or that it was chosen."""
        return self.reason or self.why

    @property
    def relative_error(self) -> float | None:
        value: float | None = self.numerics.get("relative_error")
        return value

    @property
    def tolerance(self) -> float | None:
        value: float | None = self.numerics.get("tolerance")
        return value


@dataclass(frozen=True, kw_only=True)
class SearchDecision(Record):
    """The per-row search's decision at one batch size (`kit.search.decision.Decision.summary()`
    and whether it was reused from the cache); the rest of it stays in `more`."""

    batch_size: int | None = None
    chosen: str | None = None
    fallback: bool = False
    plan: Json = field(default_factory=dict, metadata={_READ: _map})
    reused: bool = False


@dataclass(frozen=True, kw_only=True)
class FailedBatch(Record):
    """A model benchmark's batch that raised, and the error."""

    batch_size: int
    error: str = field(default="", metadata={_READ: _text})


@dataclass(frozen=True, kw_only=True)
class OpBreakdown(Record):
    """Where the profiled calls of one batch size spent their time (kit.measure.op_breakdown); the
    roofline row of that batch takes its matrix shares."""

    batch_size: int
    matrix_time_share: float | None = None
    matrix_fraction_of_peak: float | None = None


@dataclass(frozen=True, kw_only=True)
class PhaseRow(Record):
    phase: str
    seconds: float
    batch_size: int | None = None
    detail: str = field(default="", metadata={_READ: _text})


@dataclass(frozen=True, kw_only=True)
class TimeAccount(Record):
    """Where a run's time went (`kit.measure.time_account.TimeAccount.to_dict()`)."""

    total_s: float | None = None  # None: not recorded (a missing total is no zero)
    other_s: float | None = None
    phases: tuple[PhaseRow, ...] = field(default=(), metadata={_READ: _table(PhaseRow)})

    @property
    def raw(self) -> dict[str, Any]:
        """As written, for kit.measure.time_account.by_phase."""
        return self.to_dict()


def _rows_of(row: type[R]) -> Any:
    """A table field of `row` records."""
    return field(default=(), metadata={_READ: _table(row)})


def _plain() -> Any:
    """A table field kept as its JSON rows."""
    return field(default=(), metadata={_READ: _json_rows})


@dataclass(frozen=True, kw_only=True)
class Tables(Record):
    """The tables a run wrote, in the order it wrote them (a table not written is its default and
    is not written). Plain JSON rows, shown column by column and read by no one by field:
    `published` (the C2 paper's tables as the run read them), the server study's `fixed_batch`,
    `probes`, `best`, `simulated_curve`, `c2_prediction` (each a row per policy or rate, its
    columns the study's own) and a summary's `scorecard`."""

    # a fresh one writes only the tables a study wrote, in the order it wrote them (with_table)
    layout: tuple[str, ...] | None = field(default=(), compare=False, repr=False)
    published: tuple[Json, ...] = _plain()
    c2: tuple[C2Row, ...] = _rows_of(C2Row)
    search: tuple[SearchProbe, ...] = _rows_of(SearchProbe)
    search_decision: SearchDecision | None = field(
        default=None, metadata={_READ: _one(SearchDecision)}
    )
    search_by_batch: tuple[SearchDecision, ...] = _rows_of(SearchDecision)
    failed_batches: tuple[FailedBatch, ...] = _rows_of(FailedBatch)
    op_breakdown: OpBreakdown | None = field(default=None, metadata={_READ: _one(OpBreakdown)})
    peaks: tuple[PeakRow, ...] = _rows_of(PeakRow)
    roofline: tuple[RooflineRow, ...] = _rows_of(RooflineRow)
    time_account: TimeAccount = field(
        default_factory=TimeAccount, metadata={_READ: _one(TimeAccount)}
    )
    fixed_batch: tuple[Json, ...] = _plain()
    probes: tuple[Json, ...] = _plain()
    best: tuple[Json, ...] = _plain()
    simulated_curve: tuple[Json, ...] = _plain()
    c2_prediction: tuple[Json, ...] = _plain()
    # why the server study's C2 prediction was not made ('' where it was, or was not asked for)
    c2_prediction_skipped: str = field(default="", metadata={_READ: _text})
    scorecard: tuple[Json, ...] = _plain()

    def with_table(self, name: str, value: object) -> Tables:
        """These tables with table `name` set to `value` (its records, or the JSON it is written as,
        read into them); a table the kit does not name is kept as JSON. A value its table's records
        cannot hold is a ValueError: a study writes the rows this kit reads."""
        f, written = self.named().get(name), _encoded(value)
        layout = self.layout or ()
        layout = layout if name in layout else (*layout, name)
        if f is None:
            return replace(self, more={**self.more, name: written}, layout=layout)
        read = f.metadata.get(_READ)
        typed = read(written) if read else value
        if not _same(_encoded(typed), written):
            raise ValueError(f"table {name!r}: {written!r} is not a table of its rows")
        more = {k: v for k, v in self.more.items() if k != name}
        table: dict[str, Any] = {f.name: typed}
        return replace(self, **table, more=more, layout=layout)

    def adding(self, name: str, *rows: object) -> Tables:
        """These tables with `rows` added at the end of table `name`."""
        return self.with_table(name, [*(self.to_dict().get(name) or []), *map(_encoded, rows)])

    @property
    def unread(self) -> tuple[str, ...]:
        """The tables this kit names but could not read (another kit's rows): kept as written."""
        named = self.named()
        return tuple(name for name in self.more if name in named)

    def has(self, name: str) -> bool:
        """Whether the run wrote a table `name`."""
        return name in self.to_dict()

    def failed(self, batch: int) -> str | None:
        """The error batch size `batch` failed with (the first, where it failed more than once);
        None where it did not fail."""
        return next((f.error for f in self.failed_batches if f.batch_size == batch), None)
