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
from kit.measure.bytemlperf import bytemlperf_figures
from kit.measure.intervals import measurement_intervals, precision_reached
from kit.measure.noise import NoiseMonitor
from kit.measure.power.base import PowerSampler, UnavailableSampler
from kit.measure.power.monitor import PowerMonitor
from kit.measure.stats import LatencyStats, ratio_interval
from kit.results import Measurement
from kit.results.windows import Noise

Call = Callable[[], object]
CallTimes = list[tuple[int, int]]  # (start_ns, end_ns) of each call, perf_counter_ns clock


@dataclass(frozen=True, kw_only=True)
class MeasureConfig:
    """How long and how often to call; validated on creation.

    The calls run in rounds of about `round_s` (default `min_duration_s / min_rounds`, at least
    MIN_ROUND_S) and at least MIN_CALLS_PER_ROUND calls per thread; calls so long that a round of
    them would pass LONG_ROUND x `round_s` close a round on their own (a round is then a block of
    time, one call long). With `target_ci` > 0 (e.g. 0.05 for +-5 %) the window goes on, round
    after round, until the throughput's 95 % interval is narrower than that (and the minimums are
    met), or `max_duration_s` passes; the time limit waits for MIN_INTERVAL_ROUNDS rounds, so every
    figure has an interval, up to HARD_LIMIT x `max_duration_s`. With `target_ci` = 0 it stops as
    soon as the minimum duration and count are met.
    """

    warmup: int = 5
    min_duration_s: float = 1.0
    min_count: int = 10
    max_duration_s: float = 600.0
    clients: int = 1
    replicas: int = 1
    target_ci: float = 0.0  # relative 95 % half-width of the throughput to reach; 0: no target
    min_rounds: int = 5  # rounds needed before the target may stop the window
    round_s: float = 0.0  # 0: min_duration_s / min_rounds (at least MIN_ROUND_S)
    # raise the minimum duration to the shortest window the power sensor resolves (NVML: 10 s);
    # False: time the window asked for, its power then labelled indicative
    # (kit.measure.power.summary)
    stretch_for_power: bool = True

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
                "clients/replicas",
                (self.clients, self.replicas),
                "use clients or replicas, not both",
            )
        if not 0 <= self.target_ci < 1:
            raise InvalidParameter(
                "target_ci", self.target_ci, "a fraction in [0, 1), e.g. 0.05 for +-5 %"
            )
        if self.min_rounds < 2:
            raise InvalidParameter(
                "min_rounds", self.min_rounds, ">= 2 (an interval needs two rounds)"
            )
        if not 0 <= self.round_s < float("inf"):
            raise InvalidParameter("round_s", self.round_s, "a finite number >= 0 (0: automatic)")

    @property
    def threads(self) -> int:
        return max(self.clients, self.replicas)

    @property
    def round_length_s(self) -> float:
        return self.round_s or max(MIN_ROUND_S, self.min_duration_s / self.min_rounds)

    def to_dict(self) -> dict:
        return asdict(self)


MIN_ROUND_S = 0.05


def time_limit(min_duration_s: float, max_duration_s: float = 0.0) -> float:
    """A window's time limit: `max_duration_s`, or (0) 10 x the minimum duration, at least 5 s;
    never below the minimum duration.

    >>> time_limit(1.0), time_limit(0.05), time_limit(2.0, 1.0)
    (10.0, 5.0, 2.0)
    """
    limit = max_duration_s or max(10 * min_duration_s, 5.0)
    return max(limit, min_duration_s)


MIN_CALLS_PER_ROUND = 3
LONG_ROUND = 3  # a round this many round lengths long closes whatever its count of calls
MIN_INTERVAL_ROUNDS = 3  # the time limit waits for these (a t interval over 2 rounds is ~13x wide)
HARD_LIMIT = 3  # ... up to this multiple of max_duration_s


class RoundController:
    """Shared by the timing threads: closes rounds, tracks the interval, decides when to stop.

    Threads compare each call's end with `check_at[0]` (one list read per call) and only call
    `check` when it has passed: at a round's end, or every call once only the count is missing.
    """

    def __init__(self, cfg: MeasureConfig, threads: int):
        self.cfg = cfg
        self.times: list[CallTimes] = [[] for _ in range(threads)]
        self.marks: list[list[int]] = []  # per closed round: each thread's end index (exclusive)
        self.round_rates: list[tuple[float, float]] = []  # (calls/s summed over threads, wall s)
        self.check_at = [0]
        self.stopped_by = ""
        self.lock = threading.Lock()
        self.round_ns = int(cfg.round_length_s * 1e9)

    def begin(self, now_ns: int | None = None) -> None:
        """Start the clock (called once, when every thread is ready; `now_ns`: the first call's
        start)."""
        self.t_begin = time.perf_counter_ns() if now_ns is None else now_ns
        self.min_end = self.t_begin + int(self.cfg.min_duration_s * 1e9)
        self.max_end = self.t_begin + int(self.cfg.max_duration_s * 1e9)
        self.hard_end = self.t_begin + int(HARD_LIMIT * self.cfg.max_duration_s * 1e9)
        self.round_end = self.t_begin + self.round_ns
        self.check_at[0] = min(self.round_end, self.max_end, self.min_end)

    def check(self, t1: int) -> bool:
        """True when the calling thread should stop."""
        with self.lock:
            if self.stopped_by:
                return True
            if t1 < self.check_at[0]:
                return False
            if t1 >= self.round_end:
                self._close_round(t1)
            reason = self._stop_reason(t1)
            if reason:
                self.stopped_by = reason
                self.check_at[0] = 0  # every thread stops at its next call's end
                return True
            if (t1 >= self.min_end and not self._count_met()) or t1 >= self.round_end:
                # only the count is missing, or the round lacks calls: next call
                self.check_at[0] = 0
            else:
                pending = [self.round_end, self.max_end] + (
                    [self.min_end] if self.min_end > t1 else []
                )
                self.check_at[0] = min(pending)
            return False

    def _count_met(self) -> bool:
        return all(len(t) >= self.cfg.min_count for t in self.times)

    def _close_round(self, now: int) -> None:
        start = self.marks[-1] if self.marks else [0] * len(self.times)
        ends = [len(t) for t in self.times]
        few = any(e - s < MIN_CALLS_PER_ROUND for s, e in zip(start, ends, strict=True))
        if any(e == s for s, e in zip(start, ends, strict=True)) or (
            few and now - self.round_start() < LONG_ROUND * self.round_ns
        ):
            return
        rate = 0.0
        first, last = None, None
        for thread, s, e in zip(self.times, start, ends, strict=True):
            span = thread[e - 1][1] - thread[s][0]
            rate += (e - s) / (span / 1e9) if span > 0 else 0.0
            first = thread[s][0] if first is None else min(first, thread[s][0])
            last = thread[e - 1][1] if last is None else max(last, thread[e - 1][1])
        assert first is not None and last is not None  # every thread timed a call this round
        self.marks.append(ends)
        self.round_rates.append((rate, (last - first) / 1e9))
        self.round_end = now + self.round_ns

    def round_start(self) -> int:
        """When the open round began: the end of the last closed round's calls, or the start."""
        if not self.marks:
            return self.t_begin
        return max(t[m - 1][1] for t, m in zip(self.times, self.marks[-1], strict=True) if m > 0)

    def rel_half_width(self) -> float | None:
        iv = ratio_interval([r * w for r, w in self.round_rates], [w for _, w in self.round_rates])
        return iv.rel_half_width

    def _stop_reason(self, t1: int) -> str:
        if t1 >= self.hard_end or (t1 >= self.max_end and len(self.marks) >= MIN_INTERVAL_ROUNDS):
            return "time limit"
        if t1 < self.min_end or not self._count_met():
            return ""
        if not self.cfg.target_ci:
            return "minimums met"
        if len(self.marks) < self.cfg.min_rounds:
            return ""
        rel = self.rel_half_width()
        return "target reached" if rel is not None and rel <= self.cfg.target_ci else ""


def time_calls(
    call: Call,
    cfg: MeasureConfig,
    start_barrier: threading.Barrier | None = None,
    control: RoundController | None = None,
    index: int = 0,
) -> CallTimes:
    """Time `call` repeatedly; the loop adds two clock reads, one append and one comparison per
    call. Rounds, the interval and the stop rule live in `control`, consulted only when a round
    ends (or, once only the count is missing, after each call)."""
    for _ in range(cfg.warmup):
        call()
    if control is None:
        control = RoundController(cfg, 1)
    clock = time.perf_counter_ns
    times = control.times[index]
    append = times.append
    check_at = control.check_at
    check = control.check
    if start_barrier is not None:
        start_barrier.wait()
        t0 = clock()
    else:  # one thread: its first call starts the window, so the calls span at least min_duration_s
        t0 = clock()
        control.begin(t0)
    while True:
        call()
        t1 = clock()
        append((t0, t1))
        if t1 >= check_at[0] and check(t1):
            return times
        t0 = clock()


def run_threads(calls: list[Call], cfg: MeasureConfig) -> list[CallTimes]:
    """Run one timing loop per call in parallel threads, started together after warm-up."""
    return run_rounds(calls, cfg).times


def run_rounds(calls: list[Call], cfg: MeasureConfig) -> RoundController:
    """Like run_threads, returning the controller: call times, round marks and why it stopped."""
    control = RoundController(cfg, len(calls))
    if len(calls) == 1:
        time_calls(calls[0], cfg, control=control)
        return control
    barrier = threading.Barrier(len(calls), action=control.begin)
    results: list[BaseException | None] = [None for _ in calls]

    def worker(i: int) -> None:
        try:
            time_calls(calls[i], cfg, barrier, control, i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the caller's thread
            barrier.abort()
            with control.lock:
                control.stopped_by = control.stopped_by or "error"
                control.check_at[0] = 0
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
    return control


def marks_from_times(calls: list[CallTimes], cfg: MeasureConfig) -> list[list[int]]:
    """The rounds the timing loop would have closed over calls timed elsewhere (the PopRT worker):
    RoundController's rule replayed call by call in order of their ends, so that no round is kept in
    which a thread made no call, and a round of few calls waits LONG_ROUND round lengths.

    >>> one = [(i * 100_000_000, (i + 1) * 100_000_000) for i in range(9)]  # 0.1 s calls
    >>> marks_from_times([one], MeasureConfig(min_duration_s=0, round_s=0.25))
    [[3], [6], [9]]
    >>> marks_from_times([one, one[:1]], MeasureConfig(min_duration_s=0, round_s=0.05))  # thread 2 idles after 1 call
    [[2, 1]]
    """  # noqa: E501
    control = RoundController(cfg, len(calls))
    starts = [thread[0][0] for thread in calls if thread]
    if not starts:
        return []
    control.begin(min(starts))
    for end, index, call in sorted((c[1], i, c) for i, thread in enumerate(calls) for c in thread):
        control.times[index].append(call)
        if end >= control.round_end:
            control._close_round(end)
    return control.marks


@dataclass(kw_only=True)
class BatchMeasurement:
    """Everything measured at one batch size; raw call times kept so any statistic can be redone.

    `batch_size` is the samples per call of one thread; with replicas, the paper's "batch" is
    `batch_size * replicas` (micro batch = batch / replicas).
    """

    batch_size: int
    mode: str  # "single", "clients" or "replicas"
    threads: int
    calls: list[CallTimes]
    latency: LatencyStats = field(init=False)  # over every timed call
    throughput: float = field(init=False)  # samples/s: all samples / (last end - first start)
    qps_bytemlperf: float = field(init=False)  # clients x batch x kept calls / kept window
    # ByteMLPerf's QPS, AVG and P99 latency over the calls it keeps
    bytemlperf: dict = field(init=False)
    wall_time_s: float = field(init=False)
    power: dict | None = None  # a PowerSummary.to_dict() from kit.measure.power, when sampled
    extra: dict = field(default_factory=dict)
    # per round: each thread's end index (kit.measure.intervals)
    rounds: list[list[int]] | None = None
    precision: dict = field(default_factory=dict)  # target_ci and why the window stopped
    noise: Noise | None = None  # the window's kit.measure.noise summary, when sampled
    intervals: dict = field(init=False)  # figure name -> kit.measure.stats.Interval

    def __post_init__(self) -> None:
        flat = [end - start for thread in self.calls for start, end in thread]
        self.latency = LatencyStats.from_ns(flat)
        first = min(t[0][0] for t in self.calls if t)
        last = max(t[-1][1] for t in self.calls if t)
        self.wall_time_s = (last - first) / 1e9
        total = self.batch_size * len(flat)
        self.throughput = total / self.wall_time_s if self.wall_time_s > 0 else float("nan")
        self.bytemlperf = bytemlperf_figures(
            self.calls, self.batch_size, self.extra.get("bytemlperf_keep_fraction")
        )
        self.qps_bytemlperf = self.bytemlperf["qps"]
        self.intervals = measurement_intervals(self)
        self.precision = precision_reached(self.precision, self.intervals["throughput"])

    @property
    def samples(self) -> int:
        return self.batch_size * self.latency.count

    def record(self) -> Measurement:
        """This window as a result's measurement (`to_dict()` as its record)."""
        return Measurement.from_dict(self.to_dict())

    def to_dict(self) -> dict:
        return {
            "batch_size": self.batch_size,
            "mode": self.mode,
            "threads": self.threads,
            "latency": self.latency.to_dict(),
            "throughput": self.throughput,
            "qps_bytemlperf": self.qps_bytemlperf,
            "bytemlperf": self.bytemlperf,
            "wall_time_s": self.wall_time_s,
            "intervals": {k: iv.to_dict() for k, iv in self.intervals.items()},
            "precision": self.precision,
            "noise": self.noise.to_dict() if self.noise else None,
            "power": self.power,
            "extra": self.extra,
            "rounds": self.rounds,
            "calls": [[[s, e] for s, e in thread] for thread in self.calls],
        }

    @classmethod
    def from_dict(cls, d: dict) -> BatchMeasurement:
        calls = [[(int(s), int(e)) for s, e in thread] for thread in d["calls"]]
        given = {
            k: v
            for k, v in (d.get("precision") or {}).items()
            if k in ("target_ci", "stopped_by", "limit_s")
        }
        return cls(
            batch_size=d["batch_size"],
            mode=d["mode"],
            threads=d["threads"],
            calls=calls,
            power=d.get("power"),
            extra=d.get("extra", {}),
            rounds=d.get("rounds"),
            precision=given,
            noise=Noise.from_dict(d["noise"]) if d.get("noise") else None,
        )


def bytemlperf_qps(calls: list[CallTimes], batch_size: int) -> float:
    """ByteMLPerf's QPS: drop 20 calls at both ends of each thread, then samples / window.

    Falls back to no trimming when a thread made too few calls to trim.
    """
    return bytemlperf_figures(calls, batch_size)["qps"]


def measure(calls: list[Call], batch_size: int, cfg: MeasureConfig) -> BatchMeasurement:
    """Time the calls (one per thread) and summarise.

    >>> m = measure([lambda: None], 4, MeasureConfig(warmup=0, min_duration_s=0, min_count=3))
    >>> m.latency.count
    3
    """
    mode = "clients" if cfg.clients > 1 else "replicas" if cfg.replicas > 1 else "single"
    control = run_rounds(calls, cfg)
    return BatchMeasurement(
        batch_size=batch_size,
        mode=mode,
        threads=len(calls),
        calls=control.times,
        rounds=control.marks,
        precision={
            "target_ci": cfg.target_ci,
            "stopped_by": control.stopped_by,
            "limit_s": cfg.max_duration_s,
        },
    )


def power_resolved(cfg: MeasureConfig, sampler: PowerSampler | type[PowerSampler]) -> MeasureConfig:
    """`cfg`, its minimum duration raised to the shortest window `sampler` resolves (NVML: 10 s),
    so that a power figure is never taken over a window its sensor cannot resolve, whatever the
    profile asked; `cfg` itself where it is already long enough (or the sensor states no minimum).

    >>> from kit.measure.power.base import UnavailableSampler
    >>> power_resolved(MeasureConfig(min_duration_s=1.0), UnavailableSampler(["none"])).min_duration_s
    1.0
    """  # noqa: E501
    from dataclasses import replace

    need = sampler.min_window_s
    if need <= cfg.min_duration_s:
        return cfg
    return replace(cfg, min_duration_s=need, max_duration_s=max(cfg.max_duration_s, need))


def timed_window(
    calls: list[Call],
    batch_size: int,
    cfg: MeasureConfig,
    sampler: PowerSampler | None = None,
    hz: float = 20.0,
) -> BatchMeasurement:
    """The one timed window every study uses: each call warmed up first, outside the window;
    then the timed calls (one thread per call), with `sampler` read over exactly those calls.

    Without a sampler the measurement's `power` says power was not sampled.

    >>> m = timed_window([lambda: None], 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3))
    >>> m.latency.count, m.power["method"]
    (3, 'unavailable')
    """
    from dataclasses import replace

    for call in calls:
        for _ in range(cfg.warmup):
            call()
    sampler = sampler or UnavailableSampler(["power not sampled in this run"])
    resolved = power_resolved(cfg, sampler) if cfg.stretch_for_power else cfg
    with NoiseMonitor() as noise, PowerMonitor(sampler, hz=hz) as monitor:
        m = measure(calls, batch_size, replace(resolved, warmup=0))
    if resolved is not cfg:
        m.extra["power_window"] = (
            f"minimum duration {cfg.min_duration_s:g} s raised to {resolved.min_duration_s:g} s: "
            f"the power sensor ({sampler.name}) resolves no shorter window"
        )
    m.noise = noise.summary()
    m.power = monitor.summary(m.samples, m.throughput).to_dict()
    m.intervals = measurement_intervals(m)  # the efficiency's interval needs the power
    return m
