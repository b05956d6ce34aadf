"""ByteMLPerf's own figures of a timed window: which calls its benchmark counts, and the QPS, AVG
and P99 latency it computes from them (general_perf/backends/IPU/engine_poprt.py, a30b4f9:
`benchmark` and `benchmark_pack`)."""

from __future__ import annotations

CallTimes = list[tuple[int, int]]  # (start_ns, end_ns) of each call

BYTEMLPERF_TRIM = 20  # calls dropped at each end of every thread by ByteMLPerf's benchmark
#: how a window too short for ByteMLPerf's trim says it kept its calls (not ByteMLPerf's own rule)
UNTRIMMED = "every call"


def bytemlperf_kept(
    calls: list[CallTimes], keep_fraction: float | None = None, trim: int = BYTEMLPERF_TRIM
) -> tuple[list[tuple[int, int]], str]:
    """Each thread's (first, end) index range of the calls ByteMLPerf counts, and how they were
    chosen.

    `benchmark` (engine_poprt.py): every thread drops `trim` calls at each end when it made more
    than 2 x `trim`, else keeps all. `benchmark_pack` (`keep_fraction`, e.g. 0.6): every thread
    keeps its middle fraction, dropping int(n x (1 - fraction) / 2) calls at each end.

    >>> bytemlperf_kept([[(0, 1)] * 50, [(0, 1)] * 45])
    ([(20, 30), (20, 25)], 'each thread without its first and last 20 calls')
    >>> bytemlperf_kept([[(0, 1)] * 10], keep_fraction=0.6)
    ([(2, 8)], "the middle 60 % of each thread's calls")
    """
    if keep_fraction is not None:
        drops = [int(len(t) * (1 - keep_fraction) / 2) for t in calls]
        share = round(keep_fraction * 100)
        return [
            (d, len(t) - d) for d, t in zip(drops, calls, strict=True)
        ], f"the middle {share} % of each thread's calls"
    if any(len(t) <= 2 * trim for t in calls):
        return [
            (0, len(t)) for t in calls
        ], f"{UNTRIMMED} (a thread made {2 * trim} calls or fewer: no trim)"
    return [
        (trim, len(t) - trim) for t in calls
    ], f"each thread without its first and last {trim} calls"


def bytemlperf_figures(
    calls: list[CallTimes], batch_size: int, keep_fraction: float | None = None
) -> dict:
    """ByteMLPerf's QPS (samples of the kept calls / their window), AVG and P99 latency (mean and
    sorted[int(0.99 n)] of the kept calls' durations), unrounded; with how the calls were kept.

    >>> f = bytemlperf_figures([[(0, 1_000_000), (1_000_000, 3_000_000)]], 4)
    >>> f["qps"], f["avg_latency_ms"], f["p99_latency_ms"]
    (2666.6666666666665, 1.5, 2.0)
    """
    ranges, how = bytemlperf_kept(calls, keep_fraction)
    kept = [t[a:b] for t, (a, b) in zip(calls, ranges, strict=True)]
    durations = sorted((e - s) / 1e6 for t in kept for s, e in t)
    n = len(durations)
    if n == 0:
        nan = float("nan")
        return {
            "qps": nan,
            "avg_latency_ms": nan,
            "p99_latency_ms": nan,
            "kept_calls": 0,
            "kept": how,
        }
    first = min(t[0][0] for t in kept if t)
    last = max(t[-1][1] for t in kept if t)
    qps = n * batch_size / ((last - first) / 1e9) if last > first else float("nan")
    return {
        "qps": qps,
        "avg_latency_ms": sum(durations) / n,
        "p99_latency_ms": durations[int(0.99 * n)],
        "kept_calls": n,
        "kept": how,
    }
