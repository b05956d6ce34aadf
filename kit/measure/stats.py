"""Statistics of timed calls: latency summaries, 95 % confidence intervals from rounds, and the
Mann-Whitney U test.

Calls are not independent (noise comes in bursts), so no interval here treats single calls as
independent samples. Every interval is built from *rounds* (consecutive blocks of calls):

- a rate or a mean (throughput, mean latency): the ratio estimator sum(a) / sum(b) over rounds,
  with its standard error from the rounds' residuals and a Student t quantile with
  rounds - 1 degrees of freedom (batch means);
- a percentile (p50, p90, p99): Woodruff's interval, the share of calls at or below the
  estimate given a standard error from the rounds (cluster sampling: never smaller than the
  independent-calls binomial error), mapped back through the empirical quantile function.

>>> iv = ratio_interval([10, 12, 11, 9, 10], [1, 1, 1, 1, 1])
>>> round(iv.value, 2), round(iv.rel_half_width, 3)
(10.4, 0.136)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu, norm
from scipy.stats import t as student_t

LEVEL = 0.95


@dataclass(frozen=True, kw_only=True)
class LatencyStats:
    """Per-call latency summary in milliseconds.

    >>> LatencyStats.from_ns([1_000_000, 3_000_000]).mean_ms
    2.0
    """

    count: int
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    p99_bytemlperf_ms: float  # sorted[int(0.99 n)], ByteMLPerf's definition

    @classmethod
    def from_ns(cls, samples_ns: list[int] | np.ndarray) -> LatencyStats:
        ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
        if ms.size == 0:
            nan = math.nan
            return cls(
                count=0,
                mean_ms=nan,
                std_ms=nan,
                min_ms=nan,
                p50_ms=nan,
                p90_ms=nan,
                p99_ms=nan,
                max_ms=nan,
                p99_bytemlperf_ms=nan,
            )
        ordered = np.sort(ms)
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls(
            count=int(ms.size),
            mean_ms=float(ms.mean()),
            std_ms=float(ms.std()),
            min_ms=float(ordered[0]),
            p50_ms=float(p50),
            p90_ms=float(p90),
            p99_ms=float(p99),
            max_ms=float(ordered[-1]),
            p99_bytemlperf_ms=float(ordered[min(int(0.99 * ms.size), ms.size - 1)]),
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LatencyStats:
        return cls(**d)


@dataclass(frozen=True)
class Interval:
    """A figure with its confidence interval [low, high], how it was computed and from how many
    rounds. `low`/`high` are None when no interval could be formed; `reason` then says why.

    >>> Interval(100.0, 95.0, 105.0, method="demo", rounds=5).text(".0f")
    '100 ± 5'
    """

    value: float
    low: float | None = None
    high: float | None = None
    _: KW_ONLY
    level: float = LEVEL
    method: str = ""
    rounds: int = 0
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        return (
            (self.high - self.low) / 2 if self.low is not None and self.high is not None else None
        )

    @property
    def rel_half_width(self) -> float | None:
        """Half-width over the value (0.05 = ±5 %)."""
        half = self.half_width
        if half is None or not self.value:
            return None
        return half / abs(self.value)

    def scaled(self, factor: float) -> Interval:
        """The same interval for `value * factor` (a unit change or a batch multiple)."""
        if self.low is None or self.high is None:
            return Interval(
                self.value * factor, method=self.method, rounds=self.rounds, reason=self.reason
            )
        lo, hi = sorted((self.low * factor, self.high * factor))
        return Interval(
            self.value * factor, lo, hi, level=self.level, method=self.method, rounds=self.rounds
        )

    def reciprocal(self, numerator: float = 1.0) -> Interval:
        """The interval of `numerator / value` (e.g. throughput = batch / latency)."""
        value = numerator / self.value if self.value else math.nan
        if self.low is None or self.high is None or self.low <= 0:
            return Interval(
                value,
                method=self.method,
                rounds=self.rounds,
                reason=self.reason or "interval reaches zero",
            )
        return Interval(
            value,
            numerator / self.high,
            numerator / self.low,
            level=self.level,
            method=self.method + " (through 1/x)",
            rounds=self.rounds,
        )

    def contains(self, x: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= x <= self.high

    def text(self, spec: str = ".4g") -> str:
        """The value with its interval (`shown`), every number in `spec`; numbers of 1000 and more
        with thousands separators, never in exponent form.

        >>> Interval(19.91, 19.343, 19.910).text()
        '19.91 [19.34, 19.91]'
        """
        return self.shown(lambda x: _number(x, spec))

    def shown(
        self, number: Callable[[float], str], width: Callable[[float], str] | None = None
    ) -> str:
        """'value ± half-width' where the interval is symmetric about the value to the digits
        shown (both distances from the value read the same in `width`, which defaults to
        `number`), else 'value [low, high]' (a percentile's interval, one through 1/x): a larger
        side shown as '±' would claim a bound the interval does not reach. Just the value without
        an interval.

        >>> Interval(200.0, 190.0, 210.0).shown(lambda x: f"{x:g}")
        '200 ± 10'
        """
        if self.low is None or self.high is None:
            return number(self.value)
        width = width or number
        below, above = width(self.value - self.low), width(self.high - self.value)
        if below == above:
            return f"{number(self.value)} ± {above}"
        return f"{number(self.value)} [{number(self.low)}, {number(self.high)}]"

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "half_width": self.half_width,
            "rel_half_width": self.rel_half_width,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Interval | None:
        if not d or d.get("value") is None:
            return None
        return cls(
            **{
                k: d[k]
                for k in ("value", "low", "high", "level", "method", "rounds", "reason")
                if k in d
            }
        )


def _number(x: float, spec: str) -> str:
    """`x` in `spec`, but 1000 and more with thousands separators, and a number of 1 or more that
    `spec` would write in exponent form (100 in '.2g') written out at the digits it keeps.

    >>> _number(100.0, ".2g"), _number(123.4, ".2g"), _number(12345.6, ".4g"), _number(0.5, ".2g")
    ('100', '120', '12,346', '0.5')
    """
    if math.isfinite(x) and abs(x) >= 1000:
        return f"{x:,.0f}"
    text = format(x, spec)
    return f"{float(text):.0f}" if "e" in text and math.isfinite(x) and abs(x) >= 1 else text


def ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    level: float = LEVEL,
    method: str = "",
) -> Interval:
    """Interval of sum(numerators) / sum(denominators), one pair per round.

    Throughput: samples and seconds per round. Mean latency: summed latency and calls per round.
    Standard error of the ratio estimator, s_d / (sqrt(k) * mean(b)) with d = a - R b, and a t
    quantile with k - 1 degrees of freedom.
    """
    a = np.asarray(numerators, dtype=np.float64)
    b = np.asarray(denominators, dtype=np.float64)
    k = len(a)
    total_b = b.sum()
    value = float(a.sum() / total_b) if total_b > 0 else math.nan
    method = method or "ratio estimator over rounds, t interval"
    if k < 2:
        return Interval(
            value, method=method, rounds=k, reason=f"{k} round(s): an interval needs at least 2"
        )
    resid = a - value * b
    se = math.sqrt(float((resid**2).sum()) / (k - 1) / k) / (total_b / k)
    half = student_t.ppf(0.5 + level / 2, k - 1) * se
    return Interval(
        value, float(value - half), float(value + half), level=level, method=method, rounds=k
    )


def quantile_interval(
    rounds_ms: Sequence[Sequence[float]],
    q: float,
    estimate: float | None = None,
    level: float = LEVEL,
) -> Interval:
    """Woodruff interval of the q-quantile (0 < q < 1) of latencies grouped by round.

    The share of calls at or below the estimate has a standard error from the rounds (its own
    ratio estimator), floored at the independent-calls binomial error sqrt(q (1 - q) / n); the
    interval is the empirical quantiles at that share -/+ t x error.
    """
    groups = [np.asarray(r, dtype=np.float64) for r in rounds_ms if len(r)]
    method = "Woodruff interval, share's error from rounds (cluster-robust)"
    if not groups:
        return Interval(math.nan, method=method, reason="no calls")
    values = np.concatenate(groups)
    n, k = values.size, len(groups)
    est = float(np.percentile(values, 100 * q)) if estimate is None else float(estimate)
    if k < 2:
        return Interval(
            est, method=method, rounds=k, reason=f"{k} round(s): an interval needs at least 2"
        )
    below = [float((g <= est).sum()) for g in groups]
    sizes = [float(g.size) for g in groups]
    share = ratio_interval(below, sizes)
    share_se = max(
        share.half_width / student_t.ppf(0.5 + level / 2, k - 1), math.sqrt(q * (1 - q) / n)
    )
    spread = student_t.ppf(0.5 + level / 2, k - 1) * share_se
    ordered = np.sort(values)
    lo = _order_stat(ordered, q - spread, floor=True)
    hi = _order_stat(ordered, q + spread, floor=False)
    return Interval(est, min(lo, est), max(hi, est), level=level, method=method, rounds=k)


def _order_stat(ordered: np.ndarray, p: float, floor: bool) -> float:
    """The empirical p-quantile as an order statistic (outward rounding keeps it conservative)."""
    n = ordered.size
    pos = p * n
    idx = math.floor(pos) - 1 if floor else math.ceil(pos)
    return float(ordered[min(max(idx, 0), n - 1)])


@dataclass(frozen=True, kw_only=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test: U of the first sample, z and the p-value."""

    u: float
    z: float
    p_value: float
    n1: int
    n2: int
    method: str = "normal approximation with tie and continuity corrections"

    def to_dict(self) -> dict:
        return asdict(self)


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> MannWhitney:
    """Do `x` and `y` come from the same distribution? scipy's two-sided test (normal approximation,
    ties and continuity corrected), with the z that p-value stands for.

    >>> r = mann_whitney_u([19, 22, 16, 29, 24], [20, 11, 17, 12])
    >>> r.u, round(r.p_value, 4)
    (17.0, 0.1113)
    """
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"both samples need values (got {a.size} and {b.size})")
    if np.unique(np.concatenate([a, b])).size == 1:  # every value tied: nothing to rank
        return MannWhitney(u=a.size * b.size / 2, z=0.0, p_value=1.0, n1=a.size, n2=b.size)
    test = mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True)
    z = float(norm.isf(test.pvalue / 2)) if test.pvalue < 1 else 0.0
    return MannWhitney(
        u=float(test.statistic),
        z=math.copysign(z, test.statistic - a.size * b.size / 2),
        p_value=float(test.pvalue),
        n1=a.size,
        n2=b.size,
    )
