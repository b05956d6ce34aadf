"""A result's timed windows and accuracy checks, read back as records (see kit.results.sections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kit.results.reasons import Reason, reason_code
from kit.results.values import Json, _map, _strings


@dataclass(frozen=True, kw_only=True)
class Latency:
    """A window's latency over every timed call (ms), as `kit.measure.stats.LatencyStats` wrote
    it."""

    count: int | None = None
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None

    @classmethod
    def from_dict(cls, d: object) -> Latency:
        d = _map(d)
        return cls(
            count=d.get("count"),
            mean_ms=d.get("mean_ms"),
            p50_ms=d.get("p50_ms"),
            p90_ms=d.get("p90_ms"),
            p99_ms=d.get("p99_ms"),
        )


@dataclass(frozen=True, kw_only=True)
class ByteMLPerfFigures:
    """ByteMLPerf's QPS, AVG and P99 latency over the calls it keeps (None: a result written
    before they were kept)."""

    qps: float | None = None
    avg_latency_ms: float | None = None
    p99_latency_ms: float | None = None
    kept: str | None = None

    @classmethod
    def from_dict(cls, d: object) -> ByteMLPerfFigures:
        d = _map(d)
        return cls(
            qps=d.get("qps"),
            avg_latency_ms=d.get("avg_latency_ms"),
            p99_latency_ms=d.get("p99_latency_ms"),
            kept=d.get("kept"),
        )

    def figure(self, name: str) -> float | None:
        """One figure by its JSON name ('qps', 'avg_latency_ms', 'p99_latency_ms')."""
        return {
            "qps": self.qps,
            "avg_latency_ms": self.avg_latency_ms,
            "p99_latency_ms": self.p99_latency_ms,
        }[name]


@dataclass(frozen=True, kw_only=True)
class Power:
    """A window's power (`kit.measure.power` PowerSummary): measured, or why it is unavailable."""

    method: str | None = None
    reason: str | None = None
    sensor: str | None = None
    mean_w: float | None = None
    samples_per_s_per_w: float | None = None
    raw: Json = field(default_factory=dict)  # as written, for kit.measure.power.summary.indicative

    @classmethod
    def from_dict(cls, d: object) -> Power | None:
        if not isinstance(d, Mapping):
            return None  # not sampled
        return cls(
            method=d.get("method"),
            reason=d.get("reason"),
            sensor=d.get("sensor"),
            mean_w=d.get("mean_w"),
            samples_per_s_per_w=d.get("samples_per_s_per_w"),
            raw=d,
        )

    @property
    def measured(self) -> bool:
        return self.method == "measured"


@dataclass(frozen=True, kw_only=True)
class Noise:
    """A window's noise (`kit.measure.noise`): noisy or quiet, and why."""

    noisy: bool = False
    reasons: tuple[str, ...] = ()
    steal_share: float | None = None  # None: /proc/stat unreadable
    other_load: float | None = None

    @classmethod
    def from_dict(cls, d: object) -> Noise | None:
        if not isinstance(d, Mapping) or not d:
            return None  # not sampled
        return cls(
            noisy=bool(d.get("noisy")),
            reasons=_strings(d.get("reasons")),
            steal_share=d.get("steal_share"),
            other_load=d.get("other_load"),
        )


@dataclass(frozen=True, kw_only=True)
class WindowPrecision:
    """How precise a window's throughput got (`reached`: the 95 % interval's relative
    half-width)."""

    reached: float | None = None
    target_ci: float | None = None
    met: bool | None = None
    rounds: int | None = None
    stopped_by: str | None = None

    @classmethod
    def from_dict(cls, d: object) -> WindowPrecision:
        d = _map(d)
        return cls(
            reached=d.get("reached"),
            target_ci=d.get("target_ci"),
            met=d.get("met"),
            rounds=d.get("rounds"),
            stopped_by=d.get("stopped_by"),
        )


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One timed window at one batch size (`kit.measure.window.BatchMeasurement.to_dict()`), read
    back with the figures it stored (never recomputed from its calls)."""

    batch_size: int
    mode: str = "single"  # "single", "clients", "replicas" or "pack"
    threads: int = 1
    throughput: float | None = None
    qps_bytemlperf: float | None = None
    latency: Latency = field(default_factory=Latency)
    bytemlperf: ByteMLPerfFigures = field(default_factory=ByteMLPerfFigures)
    # figure name -> kit.measure.stats.Interval.to_dict()
    intervals: Json = field(default_factory=dict)
    precision: WindowPrecision = field(default_factory=WindowPrecision)
    noise: Noise | None = None
    power: Power | None = None
    pack_batch_size: int | None = None
    clients: str | None = None  # how a session's clients ran, where it said so
    raw: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Json) -> Measurement:
        extra = _map(d.get("extra"))
        return cls(
            batch_size=d["batch_size"],
            mode=d.get("mode") or "single",
            threads=d.get("threads") or 1,
            throughput=d.get("throughput"),
            qps_bytemlperf=d.get("qps_bytemlperf"),
            latency=Latency.from_dict(d.get("latency")),
            bytemlperf=ByteMLPerfFigures.from_dict(d.get("bytemlperf")),
            intervals=_map(d.get("intervals")),
            precision=WindowPrecision.from_dict(d.get("precision")),
            noise=Noise.from_dict(d.get("noise")),
            power=Power.from_dict(d.get("power")),
            pack_batch_size=extra.get("pack_batch_size"),
            clients=extra.get("clients"),
            raw=d,
        )

    @classmethod
    def of(cls, m: Measurement | Json) -> Measurement:
        """`m` as a record (a measurement dict as a run wrote it, or already a record)."""
        return m if isinstance(m, Measurement) else cls.from_dict(m)

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
        return [[(int(s), int(e)) for s, e in thread] for thread in self.raw.get("calls") or []]

    @property
    def round_ends(self) -> list[list[int]] | None:
        """Per round, each thread's end index (kit.measure.intervals); None in an older result."""
        return self.raw.get("rounds")

    def interval(self, name: str) -> Json | None:
        """The stored 95 % interval of figure `name` (None where the window kept none)."""
        iv = self.intervals.get(name)
        return iv if isinstance(iv, Mapping) else None


@dataclass(frozen=True, kw_only=True)
class AccuracyCheck:
    """The published accuracy metric (or Mean Diff) of a run: its value where measured, else why
    not."""

    metric: str | None = None
    value: float | None = None
    status: str | None = None  # "measured", or "not measured: <why>"
    code: str | None = None  # why not measured, a ReasonCode (None where measured)
    dataset: str | None = None
    data_percent: float | None = None

    @classmethod
    def from_dict(cls, d: Json) -> AccuracyCheck:
        return cls(
            metric=d.get("metric"),
            value=d.get("value"),
            status=d.get("status"),
            dataset=d.get("dataset"),
            data_percent=d.get("data_percent"),
            code=d.get("reason_code"),
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


@dataclass(frozen=True, kw_only=True)
class NumericCheck:
    """A backend's outputs against the fp32 CPU reference at one batch size
    (`kit.measure.numerics`)."""

    batch_size: int | None = None
    # mean_abs, std_abs, max_abs, mean_rel, max_rel: those written
    diffs: Json = field(default_factory=dict)
    histograms: Json | None = None  # ByteMLPerf's diff-distribution counts, where recorded

    @classmethod
    def from_dict(cls, d: Json) -> NumericCheck:
        histograms = d.get("histograms")
        return cls(
            batch_size=d.get("batch_size"),
            diffs={k: d[k] for k in DIFFS if k in d},
            histograms=histograms if isinstance(histograms, Mapping) and histograms else None,
        )

    def diff(self, name: str) -> float | None:
        """One of the diffs by its JSON name (None where not written)."""
        return self.diffs.get(name)
