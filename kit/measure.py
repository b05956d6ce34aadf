"""The timing loop: warm-up, then calls until a minimum duration AND a minimum count are met.

One loop serves every in-process backend. Multi-client mode (ByteMLPerf's IPU method) gives
each thread the same call on one shared session; multi-replica mode (the C2 paper's one session
per IPU) gives each thread its own session's call. Both are `run_threads` over a list of calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kit.errors import InvalidParameter
from kit.power.base import PowerSampler
from kit.power.monitor import PowerMonitor
from kit.stats import LatencyStats

Call = Callable[[], object]
CallTimes = list[tuple[int, int]]  # (start_ns, end_ns) of each call, perf_counter_ns clock

BYTEMLPERF_TRIM = 20  # calls dropped at each end of every thread by ByteMLPerf's QPS formula


@dataclass(frozen=True)
class MeasureConfig:
    """How long and how often to call; validated on creation."""

    warmup: int = 5
    min_duration_s: float = 1.0
    min_count: int = 10
    max_duration_s: float = 600.0
    clients: int = 1
    replicas: int = 1

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise InvalidParameter("warmup", self.warmup, "must be >= 0")
        if self.min_count < 1:
            raise InvalidParameter("min_count", self.min_count, "must be >= 1")
        if not 0 <= self.min_duration_s < float("inf"):  # also rejects NaN
            raise InvalidParameter("min_duration_s", self.min_duration_s, "a finite number >= 0")
        if not self.max_duration_s >= self.min_duration_s:
            raise InvalidParameter("max_duration_s", self.max_duration_s, ">= min_duration_s")
        if self.clients < 1 or self.replicas < 1:
            raise InvalidParameter("clients/replicas", (self.clients, self.replicas), ">= 1 each")
        if self.clients > 1 and self.replicas > 1:
            raise InvalidParameter(
                "clients/replicas", (self.clients, self.replicas), "use clients or replicas, not both"
            )

    @property
    def threads(self) -> int:
        return max(self.clients, self.replicas)

    def to_dict(self) -> dict:
        return asdict(self)


def time_calls(call: Call, cfg: MeasureConfig, start_barrier: threading.Barrier | None = None) -> CallTimes:
    """Time `call` repeatedly; the loop adds two clock reads and one append per call."""
    for _ in range(cfg.warmup):
        call()
    if start_barrier is not None:
        start_barrier.wait()
    clock = time.perf_counter_ns
    times: CallTimes = []
    append = times.append
    min_count = cfg.min_count
    t_begin = clock()
    min_end = t_begin + int(cfg.min_duration_s * 1e9)
    max_end = t_begin + int(cfg.max_duration_s * 1e9)
    n = 0
    while True:
        t0 = clock()
        call()
        t1 = clock()
        append((t0, t1))
        n += 1
        if (n >= min_count and t1 >= min_end) or t1 >= max_end:
            return times


def run_threads(calls: list[Call], cfg: MeasureConfig) -> list[CallTimes]:
    """Run one timing loop per call in parallel threads, started together after warm-up."""
    if len(calls) == 1:
        return [time_calls(calls[0], cfg)]
    barrier = threading.Barrier(len(calls))
    results: list[CallTimes | BaseException] = [[] for _ in calls]

    def worker(i: int) -> None:
        try:
            results[i] = time_calls(calls[i], cfg, barrier)
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the caller's thread
            barrier.abort()
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, threading.BrokenBarrierError):
            raise r
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


@dataclass
class BatchMeasurement:
    """Everything measured at one batch size; raw call times kept so any statistic can be redone.

    `batch_size` is the samples per call of one thread; with replicas, the paper's "batch" is
    `batch_size * replicas` (micro batch = batch / replicas).
    """

    batch_size: int
    mode: str  # "single", "clients" or "replicas"
    threads: int
    calls: list[CallTimes]
    latency: LatencyStats = field(init=False)
    throughput: float = field(init=False)  # samples/s: all samples / (last end - first start)
    qps_bytemlperf: float = field(init=False)  # clients x batch x kept calls / kept window
    wall_time_s: float = field(init=False)
    power: dict | None = None  # a PowerSummary.to_dict() from kit.power, when sampled
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        flat = [end - start for thread in self.calls for start, end in thread]
        self.latency = LatencyStats.from_ns(flat)
        first = min(t[0][0] for t in self.calls if t)
        last = max(t[-1][1] for t in self.calls if t)
        self.wall_time_s = (last - first) / 1e9
        total = self.batch_size * len(flat)
        self.throughput = total / self.wall_time_s if self.wall_time_s > 0 else float("nan")
        self.qps_bytemlperf = bytemlperf_qps(self.calls, self.batch_size)

    @property
    def samples(self) -> int:
        return self.batch_size * self.latency.count

    def to_dict(self) -> dict:
        return {
            "batch_size": self.batch_size,
            "mode": self.mode,
            "threads": self.threads,
            "latency": self.latency.to_dict(),
            "throughput": self.throughput,
            "qps_bytemlperf": self.qps_bytemlperf,
            "wall_time_s": self.wall_time_s,
            "power": self.power,
            "extra": self.extra,
            "calls": [[[s, e] for s, e in thread] for thread in self.calls],
        }

    @classmethod
    def from_dict(cls, d: dict) -> BatchMeasurement:
        calls = [[(int(s), int(e)) for s, e in thread] for thread in d["calls"]]
        return cls(d["batch_size"], d["mode"], d["threads"], calls, d.get("power"), d.get("extra", {}))


def bytemlperf_qps(calls: list[CallTimes], batch_size: int, trim: int = BYTEMLPERF_TRIM) -> float:
    """ByteMLPerf's QPS: drop `trim` calls at both ends of each thread, then samples / window.

    Falls back to no trimming when a thread made too few calls to trim.
    """
    if any(len(t) <= 2 * trim for t in calls):
        trim = 0
    kept = [t[trim : len(t) - trim] for t in calls]
    first = min(t[0][0] for t in kept)
    last = max(t[-1][1] for t in kept)
    n = sum(len(t) for t in kept)
    return n * batch_size / ((last - first) / 1e9) if last > first else float("nan")


def measure(calls: list[Call], batch_size: int, cfg: MeasureConfig) -> BatchMeasurement:
    """Time the calls (one per thread) and summarise.

    >>> m = measure([lambda: None], 4, MeasureConfig(warmup=0, min_duration_s=0, min_count=3))
    >>> m.latency.count
    3
    """
    mode = "clients" if cfg.clients > 1 else "replicas" if cfg.replicas > 1 else "single"
    return BatchMeasurement(batch_size, mode, len(calls), run_threads(calls, cfg))


def timed_window(calls: list[Call], batch_size: int, cfg: MeasureConfig,
                 sampler: PowerSampler | None = None, hz: float = 20.0) -> BatchMeasurement:
    """The one timed window every study uses: each call warmed up first, outside the window;
    then the timed calls (one thread per call), with `sampler` read over exactly those calls.

    Without a sampler the measurement's `power` says power was not sampled.

    >>> m = timed_window([lambda: None], 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3))
    >>> m.latency.count, m.power["method"]
    (3, 'unavailable')
    """
    from dataclasses import replace

    from kit.power.base import UnavailableSampler

    for call in calls:
        for _ in range(cfg.warmup):
            call()
    sampler = sampler or UnavailableSampler(["power not sampled in this run"])
    with PowerMonitor(sampler, hz=hz) as monitor:
        m = measure(calls, batch_size, replace(cfg, warmup=0))
    m.power = monitor.summary(m.samples, m.throughput).to_dict()
    return m
