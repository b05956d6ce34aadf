"""The study tables publishing reads, as records (see kit.results.sections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kit.results.reasons import Reason, reason_code
from kit.results.values import Json, _map, _rows

C2_FIGURES = ("latency_ms", "throughput", "efficiency")


@dataclass(frozen=True, kw_only=True)
class C2Row:
    """One batch size of the C2 study's tables 1-3, or why a figure of it is missing."""

    batch_size: int
    latency_ms: float | None = None
    throughput: float | None = None
    efficiency: float | None = None
    reasons: Json = field(default_factory=dict)  # figure key -> why it was not measured
    reason_codes: Json = field(default_factory=dict)  # figure key -> that reason's ReasonCode
    indicative: Json = field(default_factory=dict)  # figure key -> why it is indicative only
    power_sensor: str | None = None

    @classmethod
    def from_dict(cls, d: Json) -> C2Row:
        return cls(
            batch_size=d["batch_size"],
            latency_ms=d.get("latency_ms"),
            throughput=d.get("throughput"),
            efficiency=d.get("efficiency"),
            power_sensor=d.get("power_sensor"),
            reasons={k: d[f"{k}_reason"] for k in C2_FIGURES if d.get(f"{k}_reason")},
            reason_codes={
                k: d[f"{k}_reason_code"] for k in C2_FIGURES if d.get(f"{k}_reason_code")
            },
            indicative={k: d[f"{k}_indicative"] for k in C2_FIGURES if d.get(f"{k}_indicative")},
        )

    def figure(self, key: str) -> float | None:
        """A figure by its key ('latency_ms', 'throughput', 'efficiency')."""
        return {
            "latency_ms": self.latency_ms,
            "throughput": self.throughput,
            "efficiency": self.efficiency,
        }[key]

    def reason_for(self, key: str) -> str:
        """Why figure `key` was not measured ('' where it was, or no reason was written)."""
        return str(self.reasons.get(key) or "")

    def reason_of(self, key: str) -> Reason:
        """Why figure `key` was not measured, with the code the study wrote beside it (OTHER where
        it wrote none: a reason said by its sentence)."""
        return Reason(self.reason_for(key), reason_code(self.reason_codes.get(key)))

    def indicative_for(self, key: str) -> str:
        """Why figure `key` is indicative only ('' where its power window was resolved)."""
        return str(self.indicative.get(key) or "")


@dataclass(frozen=True, kw_only=True)
class RooflineRow:
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
    below_peak_reason: str = ""

    @classmethod
    def from_dict(cls, d: Json) -> RooflineRow:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(
            **{
                **known,
                "above_bound": bool(d.get("above_bound")),
                "below_peak_reason": d.get("below_peak_reason") or "",
            }
        )


@dataclass(frozen=True, kw_only=True)
class PeakRow:
    """The device's nominal peak at one precision (int8 in GOPS), with how it was found."""

    precision: str | None = None
    gflops: float | None = None
    unit: str | None = None
    native: bool | None = None
    method: str | None = None
    source: str | None = None

    @classmethod
    def from_dict(cls, d: Json) -> PeakRow:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


@dataclass(frozen=True, kw_only=True)
class SearchProbe:
    """One candidate of the per-row search (`kit.search.probe.Probe.to_dict()`), as shown."""

    label: str
    status: str | None = None
    throughput: float | None = None
    low: float | None = None
    high: float | None = None
    today: bool = False  # today's mapping of the published precision
    load_s: float | None = None
    relative_error: float | None = None
    tolerance: float | None = None
    reason: str = ""  # why it lost, or that it was chosen

    @classmethod
    def from_dict(cls, d: Json) -> SearchProbe:
        numerics = _map(d.get("numerics"))
        return cls(
            label=d["label"],
            status=d.get("status"),
            throughput=d.get("throughput"),
            low=d.get("low"),
            high=d.get("high"),
            today=bool(d.get("today")),
            load_s=d.get("load_s"),
            relative_error=numerics.get("relative_error"),
            tolerance=numerics.get("tolerance"),
            reason=d.get("reason") or d.get("why", ""),
        )


@dataclass(frozen=True, kw_only=True)
class PhaseRow:
    phase: str
    seconds: float
    batch_size: int | None = None
    detail: str = ""

    @classmethod
    def from_dict(cls, d: Json) -> PhaseRow:
        return cls(
            phase=d["phase"],
            seconds=d["seconds"],
            batch_size=d.get("batch_size"),
            detail=d.get("detail", ""),
        )


@dataclass(frozen=True, kw_only=True)
class TimeAccount:
    """Where a run's time went (`kit.measure.time_account.TimeAccount.to_dict()`); `raw` as written,
    for kit.measure.time_account.by_phase."""

    total_s: float | None = None  # None: not recorded (a missing total is no zero)
    other_s: float | None = None
    phases: tuple[PhaseRow, ...] = ()
    raw: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: object) -> TimeAccount:
        d = _map(d)
        return cls(
            total_s=d.get("total_s"),
            other_s=d.get("other_s"),
            phases=tuple(PhaseRow.from_dict(p) for p in _rows(d.get("phases"))),
            raw=d,
        )


class Tables:
    """The study-specific tables publishing reads, each read when first asked for (a table an
    older kit wrote differently fails where it is shown, not every reader of the result); every
    other table stays in `RunResult.tables`."""

    def __init__(self, tables: object) -> None:
        self._d = _map(tables)

    @classmethod
    def from_dict(cls, d: object) -> Tables:
        return cls(d)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tables) and self._d == other._d

    __hash__ = None  # type: ignore[assignment]  # mutable tables: equal by content, not hashable

    @cached_property
    def c2(self) -> tuple[C2Row, ...]:
        return tuple(C2Row.from_dict(r) for r in _rows(self._d.get("c2")))

    @cached_property
    def roofline(self) -> tuple[RooflineRow, ...]:
        return tuple(RooflineRow.from_dict(r) for r in _rows(self._d.get("roofline")))

    @cached_property
    def peaks(self) -> tuple[PeakRow, ...]:
        """The device's nominal peaks, one per precision."""
        return tuple(PeakRow.from_dict(r) for r in _rows(self._d.get("peaks")))

    @cached_property
    def search(self) -> tuple[SearchProbe, ...]:
        """The per-row search's candidates, one each."""
        return tuple(SearchProbe.from_dict(r) for r in _rows(self._d.get("search")))

    @property
    def search_decision(self) -> Json | None:
        """The search decision's summary (kit.search.decision), where the run was searched."""
        decision = self._d.get("search_decision")
        return decision if isinstance(decision, Mapping) and decision else None

    @cached_property
    def failed_batches(self) -> dict[int, str]:
        """Batch size -> the error it failed with (a model benchmark's batch that raised), the first
        each."""
        out: dict[int, str] = {}
        for row in _rows(self._d.get("failed_batches")):
            out.setdefault(int(row["batch_size"]), str(row.get("error") or ""))
        return out

    @cached_property
    def time_account(self) -> TimeAccount:
        return TimeAccount.from_dict(self._d.get("time_account"))

    def has(self, name: str) -> bool:
        """Whether the run wrote a table `name` (the server study's tables: fixed_batch,
        probes, ...)."""
        return name in self._d

    def rows(self, name: str) -> tuple[Json, ...]:
        """The rows of table `name` as the run wrote them (); the server study's tables are shown as
        they are, column by column."""
        return _rows(self._d.get(name))

    @property
    def published(self) -> tuple[Json, ...]:
        """The C2 study's published tables, as the run read them."""
        return _rows(self._d.get("published"))
