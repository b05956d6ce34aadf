"""95 % intervals of a measurement's figures, from its rounds of calls; and the interval of a
scorecard figure, looked up in a result.

Rounds come from the timing loop (kit.measure.window.RoundController: blocks of at least `round_s`
and 3 calls per thread). A measurement made elsewhere without rounds (an out-of-process backend, an
older result) is cut after the fact into up to 10 blocks of consecutive calls per thread, and the
method says so. Either way no interval treats single calls as independent samples.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from kit.measure.bytemlperf import bytemlperf_kept
from kit.measure.stats import Interval, quantile_interval, ratio_interval

MIN_CALLS_PER_BLOCK = 3
MAX_BLOCKS = 10
ROUNDS = "rounds of the timing loop"
BLOCKS = "blocks of consecutive calls cut after the run"
LATENCY_QUANTILES = {"p50_ms": 0.50, "p90_ms": 0.90, "p99_ms": 0.99, "p99_bytemlperf_ms": 0.99}


def round_groups(
    calls: list[list[tuple[int, int]]], marks: list[list[int]] | None
) -> tuple[list, str]:
    """[[thread's calls of the round] per thread] per round, and which grouping was used.

    Calls after the last closed round join it (or form a round when each thread has enough)."""
    if marks and len(marks) >= 1:
        bounds = [list(m) for m in marks]
        tail = [len(t) - b for t, b in zip(calls, bounds[-1], strict=True)]
        if min(tail) >= MIN_CALLS_PER_BLOCK:
            bounds.append([len(t) for t in calls])
        elif max(tail) > 0:
            bounds[-1] = [len(t) for t in calls]
        if len(bounds) >= 2:
            starts = [[0] * len(calls)] + bounds[:-1]
            return [
                [t[s:e] for t, s, e in zip(calls, a, b, strict=True)]
                for a, b in zip(starts, bounds, strict=True)
            ], ROUNDS
    shortest = min((len(t) for t in calls), default=0)
    k = min(MAX_BLOCKS, shortest // MIN_CALLS_PER_BLOCK)
    if k < 2:
        return [calls], BLOCKS
    cuts = [np.linspace(0, len(t), k + 1).astype(int) for t in calls]
    return [
        [t[c[i] : c[i + 1]] for t, c in zip(calls, cuts, strict=True)] for i in range(k)
    ], BLOCKS


def round_rates(groups: list) -> list[tuple[float, float]]:
    """(calls/s summed over threads, wall seconds) per round."""
    out = []
    for group in groups:
        rate, first, last = 0.0, math.inf, -math.inf
        for thread in group:
            if not thread:
                continue
            span = (thread[-1][1] - thread[0][0]) / 1e9
            rate += len(thread) / span if span > 0 else 0.0
            first, last = min(first, thread[0][0]), max(last, thread[-1][1])
        out.append((rate, (last - first) / 1e9 if last > first else 0.0))
    return out


def round_values(calls, marks, batch_size: int) -> dict[str, list[float]]:
    """Per round: throughput (samples/s) and mean latency (ms), for tests between runs."""
    groups, _ = round_groups(calls, marks)
    rates = round_rates(groups)
    means = [float(np.mean([e - s for t in g for s, e in t])) / 1e6 for g in groups]
    return {"throughput": [r * batch_size for r, _ in rates], "mean_ms": means}


def measurement_intervals(m) -> dict[str, Interval]:
    """Intervals of a kit.measure.window.BatchMeasurement's throughput, QPS, latencies and
    efficiency."""
    groups, how = round_groups(m.calls, m.rounds)
    rates = round_rates(groups)
    rel = ratio_interval(
        [r * w for r, w in rates],
        [w for _, w in rates],
        method=f"ratio estimator over {how}, t interval",
    ).rel_half_width
    out = {}
    for name, value in (("throughput", m.throughput), ("qps_bytemlperf", m.qps_bytemlperf)):
        out[name] = _relative(
            value,
            rel,
            len(groups),
            f"throughput of {len(groups)} {how}: ratio estimator "
            "(samples / seconds), t interval; relative width applied",
        )
    latency = [[(e - s) / 1e6 for t in g for s, e in t] for g in groups]
    mean = ratio_interval(
        [sum(x) for x in latency],
        [len(x) for x in latency],
        method=f"ratio estimator over {how} (latency sum / calls), t interval",
    )
    out["mean_ms"] = replace(mean, value=m.latency.mean_ms)
    for name, q in LATENCY_QUANTILES.items():
        iv = quantile_interval(latency, q, estimate=getattr(m.latency, name))
        out[name] = replace(iv, method=f"{iv.method} over {how}")
    out.update(bytemlperf_intervals(m))
    power = m.power or {}
    if power.get("method") == "measured" and power.get("samples_per_s_per_w"):
        out["samples_per_s_per_w"] = _relative(
            power["samples_per_s_per_w"],
            rel,
            len(groups),
            "the throughput's relative interval (the power reading's own variation is not included)",  # noqa: E501
        )
    return out


def bytemlperf_intervals(m) -> dict[str, Interval]:
    """Intervals of ByteMLPerf's AVG and P99 latency, over the rounds of the calls it keeps."""
    ranges, _ = bytemlperf_kept(m.calls, m.extra.get("bytemlperf_keep_fraction"))
    kept = [t[a:b] for t, (a, b) in zip(m.calls, ranges, strict=True)]
    groups, how = round_groups(kept, kept_marks(m.rounds, ranges))
    latency = [[(e - s) / 1e6 for t in g for s, e in t] for g in groups]
    latency = [x for x in latency if x]
    figures = m.bytemlperf
    mean = ratio_interval(
        [sum(x) for x in latency],
        [len(x) for x in latency],
        method=f"ratio estimator over {how} of the calls ByteMLPerf keeps, t interval",
    )
    p99 = quantile_interval(latency, 0.99, estimate=figures["p99_latency_ms"])
    return {
        "bytemlperf_avg_latency_ms": replace(mean, value=figures["avg_latency_ms"]),
        "bytemlperf_p99_latency_ms": replace(
            p99, method=f"{p99.method} over {how} of the calls ByteMLPerf keeps"
        ),
    }


def kept_marks(
    marks: list[list[int]] | None, ranges: list[tuple[int, int]]
) -> list[list[int]] | None:
    """Round marks (each thread's end index per round) moved into the kept calls' ranges; a round
    left with no kept call is dropped."""
    if not marks:
        return marks
    out, last = [], 0
    for mark in marks:
        moved = [min(max(b - lo, 0), hi - lo) for b, (lo, hi) in zip(mark, ranges, strict=True)]
        if sum(moved) > last:
            out.append(moved)
            last = sum(moved)
    return out


def _relative(value: float, rel: float | None, rounds: int, method: str) -> Interval:
    if value is None or not math.isfinite(value):
        return Interval(math.nan, method=method, rounds=rounds, reason="no value")
    if rel is None:
        return Interval(
            value,
            method=method,
            rounds=rounds,
            reason=f"{rounds} round(s): an interval needs at least 2",
        )
    return Interval(value, value * (1 - rel), value * (1 + rel), method=method, rounds=rounds)


def precision_reached(given: dict, throughput: Interval) -> dict:
    """The target, the precision reached (throughput's relative half-width) and whether it was
    met."""
    target = given.get("target_ci") or 0.0
    reached = throughput.rel_half_width
    return {
        "target_ci": target,
        "reached": reached,
        "rounds": throughput.rounds,
        "met": None if not target else (reached is not None and reached <= target),
        "stopped_by": given.get("stopped_by", ""),
        # the time limit it ran under
        **({"limit_s": given["limit_s"]} if "limit_s" in given else {}),
    }


# --- scorecard lookups ---------------------------------------------------------------------------

BYTEMLPERF_FIGURES = {
    "QPS": "qps_bytemlperf",
    "AVG Latency": "bytemlperf_avg_latency_ms",
    "P99 Latency": "bytemlperf_p99_latency_ms",
}


def figure_interval(
    result, figure: str, batch, value: float | None = None
) -> tuple[Interval | None, str]:
    """(interval, noise note) of one scorecard figure of `result` (a RunResult) at `batch`;
    `value` is the figure itself where the interval is the throughput's relative one (efficiency).

    The note is '' for a quiet window, else 'noisy: <reasons>'."""
    if result is None or batch in (None, ""):
        return None, ""
    batch = int(batch)
    for m in result.measurements:  # kit.results.Measurement
        card_batch = m.batch_size * (m.threads if m.mode == "replicas" else 1)
        ivs = dict(m.intervals)
        # pack: the pack's batch
        if figure in BYTEMLPERF_FIGURES and m.measured_batch == batch and m.mode != "replicas":
            return Interval.from_dict(ivs.get(BYTEMLPERF_FIGURES[figure])), noise_note(m.to_dict())
        if figure in ("Latency", "Throughput", "Energy efficiency") and card_batch == batch:
            return _c2_interval(figure, ivs, batch, value), noise_note(m.to_dict())
    return None, ""


def _c2_interval(figure: str, ivs: dict, batch: int, value: float | None) -> Interval | None:
    """The C2 table's figures: latency = mean call time; throughput = batch / latency."""
    latency = Interval.from_dict(ivs.get("mean_ms"))
    if latency is None:
        return None
    if figure == "Latency":
        return latency
    throughput = latency.reciprocal(batch * 1000.0)
    if figure == "Throughput":
        return throughput
    if value is None or throughput.rel_half_width is None:
        return None
    return _relative(
        value,
        throughput.rel_half_width,
        throughput.rounds,
        "the throughput's relative interval (the power reading's own variation is not included)",
    )


def noise_note(measurement: dict) -> str:
    """'noisy: <why>' for a window the machine disturbed or whose interval stayed wider than its
    precision target (it stopped at its limit first), else ''.

    >>> noise_note({"precision": {"target_ci": 0.05, "reached": 0.35, "met": False,
    ...                            "stopped_by": "time limit"}})
    'noisy: its interval stayed at ±35.0%, wider than its ±5% target (time limit)'
    >>> noise_note({"precision": {"target_ci": 0.05, "reached": 0.03, "met": True}})
    ''
    >>> noise_note({"precision": {"target_ci": 0.05, "reached": None, "met": False}})
    'noisy: its interval never reached its ±5% target (?)'
    """
    noise = measurement.get("noise") or {}
    reasons = list(noise.get("reasons") or []) if noise.get("noisy") else []
    precision = measurement.get("precision") or {}
    if precision.get("target_ci") and precision.get("met") is False:
        reached = precision.get("reached")
        width = f"stayed at ±{reached:.1%}, wider than" if reached is not None else "never reached"
        reasons.append(
            f"its interval {width} its ±{precision['target_ci']:.0%} target "
            f"({precision.get('stopped_by') or '?'})"
        )
    return f"noisy: {'; '.join(reasons)}" if reasons else ""
