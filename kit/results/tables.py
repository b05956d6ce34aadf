"""The study tables publishing reads, as records (see kit.results.sections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
    indicative: Json = field(default_factory=dict)  # figure key -> why it is indicative only
    power_sensor: str | None = None

    @classmethod
    def from_dict(cls, d: Json) -> C2Row:
        return cls(batch_size=d["batch_size"], latency_ms=d.get("latency_ms"), throughput=d.get("throughput"),
                   efficiency=d.get("efficiency"), power_sensor=d.get("power_sensor"),
                   reasons={k: d[f"{k}_reason"] for k in C2_FIGURES if d.get(f"{k}_reason")},
                   indicative={k: d[f"{k}_indicative"] for k in C2_FIGURES if d.get(f"{k}_indicative")})

    def figure(self, key: str) -> float | None:
        """A figure by its key ('latency_ms', 'throughput', 'efficiency')."""
        return {"latency_ms": self.latency_ms, "throughput": self.throughput, "efficiency": self.efficiency}[key]

    def reason_for(self, key: str) -> str:
        """Why figure `key` was not measured ('' where it was, or no reason was written)."""
        return str(self.reasons.get(key) or "")

    def indicative_for(self, key: str) -> str:
        """Why figure `key` is indicative only ('' where its power window was resolved)."""
        return str(self.indicative.get(key) or "")


@dataclass(frozen=True, kw_only=True)
class RooflineRow:
    """One figure's roofline position (`kit.studies` roofline rows)."""

    batch_size: int
    precision: str
    flops_per_sample: float
    bytes_per_sample: float
    intensity_flop_per_byte: float
    ridge_flop_per_byte: float
    bound: str
    attainable_gflops: float
    achieved_gflops: float
    fraction_of_bound: float
    far_below: bool
    above_bound: bool = False
    peak_gflops: float
    peak_unit: str
    bandwidth_gbs: float
    bandwidth_method: str = ""
    bytes_method: str = ""
    unresolved_tensors: int = 0
    matrix_time_share: float | None = None
    matrix_fraction_of_peak: float | None = None
    below_peak_reason: str = ""

    @classmethod
    def from_dict(cls, d: Json) -> RooflineRow:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**{**known, "above_bound": bool(d.get("above_bound")),
                      "below_peak_reason": d.get("below_peak_reason") or ""})


@dataclass(frozen=True, kw_only=True)
class Tables:
    """The study-specific tables publishing reads; every other table stays in `RunResult.tables`."""

    c2: tuple[C2Row, ...] = ()
    roofline: tuple[RooflineRow, ...] = ()
    peaks: tuple[Json, ...] = ()  # kit.hardware peaks, one per precision
    search: tuple[Json, ...] = ()  # kit.search.probe.Probe.to_dict(), one per candidate
    search_decision: Json | None = None  # kit.search.decision summary, where the run was searched
    time_account: Json = field(default_factory=dict)  # kit.measure.time_account.TimeAccount.to_dict()
    published: tuple[Json, ...] = ()  # the C2 study's published tables, as the run read them

    @classmethod
    def from_dict(cls, d: object) -> Tables:
        d = _map(d)
        decision = d.get("search_decision")
        return cls(c2=tuple(C2Row.from_dict(r) for r in _rows(d.get("c2"))),
                   roofline=tuple(RooflineRow.from_dict(r) for r in _rows(d.get("roofline"))),
                   peaks=_rows(d.get("peaks")), search=_rows(d.get("search")),
                   search_decision=decision if isinstance(decision, Mapping) and decision else None,
                   time_account=_map(d.get("time_account")), published=_rows(d.get("published")))
