"""A result's timed windows, numeric checks and accuracy checks as records: built by the run,
written from and read back into (see kit.results.sections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kit.results.reasons import Reason, reason_code
from kit.results.session import Session
from kit.results.values import _KEY, _READ, Json, Record, _map, _or, _strings, _whole


@dataclass(frozen=True, kw_only=True)
class Latency(Record):
    """A window's latency over every timed call (ms), as `kit.measure.stats.LatencyStats` wrote
    it."""

    count: int | None = None
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class ByteMLPerfFigures(Record):
    """ByteMLPerf's QPS, AVG and P99 latency over the calls it keeps (None: a result written
    before they were kept)."""

    qps: float | None = None
    avg_latency_ms: float | None = None
    p99_latency_ms: float | None = None
    kept: str | None = None

    def figure(self, name: str) -> float | None:
        """One figure by its JSON name ('qps', 'avg_latency_ms', 'p99_latency_ms')."""
        return {
            "qps": self.qps,
            "avg_latency_ms": self.avg_latency_ms,
            "p99_latency_ms": self.p99_latency_ms,
        }[name]


@dataclass(frozen=True, kw_only=True)
class Power(Record):
    """A window's power (`kit.measure.power` PowerSummary): measured, or why it is unavailable."""

    method: str | None = None
    reason: str | None = None
    sensor: str | None = None
    mean_w: float | None = None
    samples_per_s_per_w: float | None = None

    @property
    def raw(self) -> dict[str, Any]:
        """As written, for kit.measure.power.summary.indicative."""
        return self.to_dict()

    @property
    def measured(self) -> bool:
        return self.method == "measured"


def _power(value: object) -> Power | None:
    return Power.from_dict(value) if isinstance(value, Mapping) else None  # None: not sampled


@dataclass(frozen=True, kw_only=True)
class Noise(Record):
    """A window's noise (`kit.measure.noise`): noisy or quiet, and why."""

    noisy: bool = False
    reasons: tuple[str, ...] = field(default=(), metadata={_READ: _strings})
    steal_share: float | None = None  # None: /proc/stat unreadable
    other_load: float | None = None


def _noise(value: object) -> Noise | None:
    # None: not sampled
    return Noise.from_dict(value) if isinstance(value, Mapping) and value else None


def _session(value: object) -> Session | None:
    # None: not recorded (a result from before each window kept its session)
    return Session.from_dict(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True, kw_only=True)
class WindowPrecision(Record):
    """How precise a window's throughput got (`reached`: the 95 % interval's relative
    half-width)."""

    target_ci: float | None = None
    reached: float | None = None
    rounds: int | None = None
    met: bool | None = None
    stopped_by: str | None = None


@dataclass(frozen=True, kw_only=True)
class Measurement(Record):
    """One timed window at one batch size (`kit.measure.window.BatchMeasurement.record()`), with the
    figures it stored (never recomputed from its calls); its calls and rounds stay in `more`."""

    batch_size: int = field(metadata={_READ: _whole})  # a null or "32" is no batch size
    # "single", "clients", "replicas", "pack"
    mode: str = field(default="single", metadata={_READ: _or("single")})
    threads: int = field(default=1, metadata={_READ: _or(1)})
    latency: Latency = field(default_factory=Latency, metadata={_READ: Latency.from_dict})
    throughput: float | None = None
    qps_bytemlperf: float | None = None
    bytemlperf: ByteMLPerfFigures = field(
        default_factory=ByteMLPerfFigures, metadata={_READ: ByteMLPerfFigures.from_dict}
    )
    # figure name -> kit.measure.stats.Interval.to_dict()
    intervals: Json = field(default_factory=dict, metadata={_READ: _map})
    precision: WindowPrecision = field(
        default_factory=WindowPrecision, metadata={_READ: WindowPrecision.from_dict}
    )
    noise: Noise | None = field(default=None, metadata={_READ: _noise})
    power: Power | None = field(default=None, metadata={_READ: _power})
    # what a backend added (pack_batch_size, clients, timing)
    extra: Json = field(default_factory=dict, metadata={_READ: _map})
    # the search's plan this window measured, where the run searched
    searched_plan: Json | None = None
    # the session this window timed (each batch loads its own); None: an older result's
    session: Session | None = field(default=None, metadata={_READ: _session})

    @property
    def pack_batch_size(self) -> int | None:
        value: int | None = self.extra.get("pack_batch_size")
        return value

    @property
    def clients(self) -> str | None:
        """How a session's clients ran, where it said so."""
        value: str | None = self.extra.get("clients")
        return value

    @property
    def measured_batch(self) -> int:
        """The batch size the measurement stands for: a pack-mode run's pack batch, else its
        calls'."""
        return self.pack_batch_size or self.batch_size

    def figure(self, name: str) -> float | None:
        """A figure by its JSON name: 'qps_bytemlperf', 'throughput' or a latency ('mean_ms',
        'p99_ms', ...)."""
        if name in ("qps_bytemlperf", "throughput"):
            return self.qps_bytemlperf if name == "qps_bytemlperf" else self.throughput
        value: float | None = getattr(self.latency, name)
        return value

    def call_times(self) -> list[list[tuple[int, int]]]:
        """Each thread's (start, end) in ns of every timed call, as stored (read only when asked
        for)."""
        return [[(int(s), int(e)) for s, e in thread] for thread in self.more.get("calls") or []]

    @property
    def round_ends(self) -> list[list[int]] | None:
        """Per round, each thread's end index (kit.measure.intervals); None in an older result."""
        ends: list[list[int]] | None = self.more.get("rounds")
        return ends

    def interval(self, name: str) -> Json | None:
        """The stored 95 % interval of figure `name` (None where the window kept none)."""
        iv = self.intervals.get(name)
        return iv if isinstance(iv, Mapping) else None


@dataclass(frozen=True, kw_only=True)
class AccuracyCheck(Record):
    """The published accuracy metric (or Mean Diff) of a run: its value where measured, else why not
    (`kit.datasets.accuracy`); its details (per-class counts, ...) stay in `more`."""

    model: str | None = None
    dataset: str | None = None
    metric: str | None = None
    value: float | None = None
    status: str | None = None  # "measured", or "not measured: <why>"
    # why not measured, a ReasonCode
    code: str | None = field(default=None, metadata={_KEY: "reason_code"})
    data_percent: float | None = None
    weights: Json | None = None  # the WeightsInfo the session ran (kit.models.spec)
    # the scorer's counts and settings (samples, batch size, dataset directory, ...)
    details: Json = field(default_factory=dict)

    @classmethod
    def not_measured(cls, model: str, why: str, code: str) -> AccuracyCheck:
        """A check that could not be made: `why` as its status, with its ReasonCode."""
        return cls.from_dict(
            {"model": model, "status": f"not measured: {why}", "value": None, "reason_code": code}
        )

    @property
    def reason(self) -> Reason:
        """Why it was not measured: the status without its "not measured: ", with its code."""
        text = (self.status or "no status recorded").removeprefix("not measured: ")
        return Reason(text, reason_code(self.code))

    @property
    def measured(self) -> bool:
        return self.status == "measured" and self.value is not None


DIFFS = ("mean_abs", "std_abs", "max_abs", "mean_rel", "max_rel")
#: What a numerics check's `reference` says where the run is the fp32 CPU reference itself
SELF_REFERENCE = "this run is the reference"


def _histograms(value: object) -> Json | None:
    return value if isinstance(value, Mapping) and value else None


@dataclass(frozen=True, kw_only=True)
class NumericCheck(Record):
    """A backend's outputs against the fp32 CPU reference at one batch size (`kit.measure.numerics`
    `NumericDiff.check`); its counts and reference stay in `more`."""

    batch_size: int | None = None
    mean_abs: float | None = None
    std_abs: float | None = None
    max_abs: float | None = None
    mean_rel: float | None = None
    max_rel: float | None = None
    # ByteMLPerf's diff counts
    histograms: Json | None = field(default=None, metadata={_READ: _histograms})

    @property
    def diffs(self) -> dict[str, float]:
        """The diffs written (mean_abs, std_abs, max_abs, mean_rel, max_rel), by JSON name."""
        return {k: v for k in DIFFS if (v := getattr(self, k)) is not None}

    def diff(self, name: str) -> float | None:
        """One of the diffs by its JSON name (None where not written)."""
        return self.diffs.get(name)
