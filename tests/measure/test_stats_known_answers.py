"""Known answers for the latency statistics, ByteMLPerf's trimmed figures and the intervals (issue
33): unequal call times where every percentile, the trim and the std give distinct answers, worked
out here by hand; intervals against scipy's own quantiles; property tests of the intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t

from kit.measure.bytemlperf import bytemlperf_figures, bytemlperf_kept
from kit.measure.stats import Interval, LatencyStats, quantile_interval, ratio_interval

MS = 1_000_000


def test_latency_stats_of_ten_unequal_calls():
    """1..10 ms: numpy's linear percentile at p of n = 10 sits at index p/100 x 9."""
    s = LatencyStats.from_ns([k * MS for k in (3, 1, 4, 10, 5, 9, 2, 6, 8, 7)])
    assert s.count == 10 and s.min_ms == 1.0 and s.max_ms == 10.0
    assert s.mean_ms == pytest.approx(5.5)
    # population std (ddof 0): sum((k - 5.5)^2) / 10
    assert s.std_ms == pytest.approx(math.sqrt(8.25))
    assert s.p50_ms == pytest.approx(5.5)  # index 4.5: between 5 and 6
    assert s.p90_ms == pytest.approx(9.1)  # index 8.1: 9 + 0.1 x (10 - 9)
    assert s.p99_ms == pytest.approx(9.91)  # index 8.91
    assert s.p99_bytemlperf_ms == 10.0  # sorted[int(0.99 x 10)] = sorted[9]


def test_latency_stats_of_no_calls_are_nan():
    s = LatencyStats.from_ns([])
    assert s.count == 0 and all(math.isnan(v) for k, v in s.to_dict().items() if k != "count")


def test_bytemlperf_p99_is_the_sorted_call_at_int_099_n():
    # 200 calls of 1..200 ms: sorted[int(0.99 x 200)] = sorted[198] = 199 ms; numpy's p99 is 198.01
    s = LatencyStats.from_ns([k * MS for k in range(200, 0, -1)])
    assert s.p99_bytemlperf_ms == 199.0 and s.p99_ms == pytest.approx(198.01)


def _thread(durations_ms, start_ms=0):
    out, t = [], start_ms * MS
    for d in durations_ms:
        out.append((t, t + d * MS))
        t += d * MS
    return out


def test_bytemlperf_trims_twenty_calls_at_each_end_of_each_thread():
    """Calls k = 0..49 last k + 1 ms: kept are calls 20..29 (21..30 ms), 10 of them."""
    calls = [_thread(range(1, 51))]
    ranges, how = bytemlperf_kept(calls)
    assert ranges == [(20, 30)] and "first and last 20" in how
    f = bytemlperf_figures(calls, batch_size=3)
    assert f["kept_calls"] == 10
    assert f["avg_latency_ms"] == pytest.approx(25.5)  # mean of 21..30
    assert f["p99_latency_ms"] == 30.0  # sorted[int(9.9)] = sorted[9]
    window_s = sum(range(21, 31)) / 1000  # the kept calls back to back: 255 ms
    assert f["qps"] == pytest.approx(10 * 3 / window_s)


def test_bytemlperf_keeps_every_call_of_a_thread_of_forty():
    calls = [_thread(range(1, 41))]
    assert bytemlperf_kept(calls)[0] == [(0, 40)]
    assert bytemlperf_kept([_thread(range(1, 42))])[0] == [(20, 21)]  # 41 calls: trimmed


def test_bytemlperf_window_spans_every_kept_thread():
    """Two threads, the second starting 100 ms later: QPS = kept samples / (last kept end - first
    kept start)."""
    a, b = _thread([1] * 50), _thread([2] * 50, start_ms=100)
    f = bytemlperf_figures([a, b], batch_size=4)
    first, last = a[20][0], b[29][1]  # 20 ms; 100 + 60 = 160 ms
    assert f["qps"] == pytest.approx(20 * 4 / ((last - first) / 1e9))
    assert f["avg_latency_ms"] == pytest.approx(1.5) and f["p99_latency_ms"] == 2.0


def test_pack_mode_keeps_the_middle_fraction():
    calls = [_thread(range(1, 11))]  # keep 0.6 of 10: drop int(10 x 0.4 / 2) = 2 each end
    f = bytemlperf_figures(calls, 1, keep_fraction=0.6)
    assert f["kept_calls"] == 6 and f["avg_latency_ms"] == pytest.approx(5.5)  # mean of 3..8
    assert f["p99_latency_ms"] == 8.0


def test_ratio_interval_matches_scipys_t_quantile():
    """Rates 10, 12, 11, 9, 13 over rounds of 1, 2, 1, 1, 1 s: R = (10 + 24 + 11 + 9 + 13) / 6."""
    a, b = [10, 24, 11, 9, 13], [1, 2, 1, 1, 1]
    r = 67 / 6
    resid = [x - r * y for x, y in zip(a, b, strict=True)]
    se = math.sqrt(sum(d * d for d in resid) / 4 / 5) / (6 / 5)
    half = student_t.ppf(0.975, 4) * se
    got = ratio_interval(a, b)
    assert got.value == pytest.approx(r)
    assert got.low == pytest.approx(r - half, rel=1e-12) and got.high == pytest.approx(
        r + half, rel=1e-12
    )
    assert got.level == 0.95 and got.rounds == 5


def test_ratio_interval_of_two_rounds_uses_one_degree_of_freedom():
    got = ratio_interval([9.0, 11.0], [1.0, 1.0])  # residuals -1, 1: se = sqrt(2 / 1 / 2) / 1 = 1
    assert got.high - got.value == pytest.approx(student_t.ppf(0.975, 1))  # 12.706, not t(2)'s 4.30


def test_ratio_interval_at_another_level():
    got = ratio_interval([9.0, 11.0, 10.0], [1.0, 1.0, 1.0], level=0.9)  # se = sqrt(2 / 2 / 3)
    assert got.high - got.value == pytest.approx(student_t.ppf(0.95, 2) * math.sqrt(1 / 3))


def test_quantile_interval_known_answer():
    """Two rounds of 1..10 and 11..20 ms; p50 estimate 10.5 (numpy). Calls at or below it: 10 of 10
    and 0 of 10: share 0.5, se from the rounds = t(0.975, 1)-scaled half-width / t = 0.5, above the
    binomial floor sqrt(0.25 / 20); spread = t(0.975, 1) x 0.5 = 6.35 covers the whole sample."""
    rounds = [list(range(1, 11)), list(range(11, 21))]
    got = quantile_interval(rounds, 0.5)
    assert (
        got.value == pytest.approx(10.5) and got.low == 1.0 and got.high == 20.0 and got.rounds == 2
    )


def test_quantile_interval_order_statistics():
    """Ten rounds of the same ten calls 1..10 ms: the share at p50's estimate (5.5) is 0.5 in every
    round, so its se is the binomial floor sqrt(0.25 / 100) = 0.05; spread = t(0.975, 9) x 0.05.
    Low: sorted[floor((0.5 - spread) x 100) - 1]; high: sorted[ceil((0.5 + spread) x 100)]."""
    rounds = [list(range(1, 11))] * 10
    spread = student_t.ppf(0.975, 9) * 0.05  # 0.1131
    ordered = sorted(x for r in rounds for x in r)
    got = quantile_interval(rounds, 0.5)
    assert got.low == ordered[math.floor((0.5 - spread) * 100) - 1]  # sorted[37] = 4
    assert got.high == ordered[math.ceil((0.5 + spread) * 100)]  # sorted[62] = 7
    assert (got.low, got.high) == (4.0, 7.0)


def test_quantile_interval_uses_the_given_estimate():
    rounds = [list(range(1, 11))] * 10
    got = quantile_interval(rounds, 0.5, estimate=6.0)  # not numpy's 5.5: the interval holds 6
    assert got.value == 6.0 and (got.low, got.high) == (4.0, 7.0)


def test_quantile_interval_needs_two_rounds_and_calls():
    assert "at least 2" in quantile_interval([[1.0, 2.0]], 0.5).reason
    assert quantile_interval([[], []], 0.5).reason == "no calls"


def test_interval_arithmetic():
    iv = Interval(10.0, 8.0, 13.0, method="m", rounds=4)
    assert iv.half_width == 2.5 and iv.rel_half_width == 0.25 and iv.available
    assert (
        iv.contains(8.0) and iv.contains(13.0) and not iv.contains(13.01) and not iv.contains(7.99)
    )
    scaled = iv.scaled(-2.0)
    assert (scaled.value, scaled.low, scaled.high) == (-20.0, -26.0, -16.0) and scaled.rounds == 4
    inv = iv.reciprocal(40.0)
    assert (inv.value, inv.low, inv.high) == (4.0, 40 / 13, 5.0) and inv.method == "m (through 1/x)"
    assert iv.text(".3g") == "10 [8, 13]"  # not symmetric: its bounds
    assert Interval(2000.0, 1500.0, 2500.0).text() == "2,000 ± 500"
    assert not Interval(5.0, 0.0, 10.0).reciprocal().available  # an interval reaching zero
    assert Interval(1.0).half_width is None and Interval(0.0, -1.0, 1.0).rel_half_width is None


round_values = st.lists(st.floats(0.5, 2.0), min_size=2, max_size=12)


@settings(max_examples=60, deadline=None)
@given(rates=round_values, seconds=round_values)
def test_a_ratio_interval_holds_its_estimate(rates, seconds):
    k = min(len(rates), len(seconds))
    a = [r * s for r, s in zip(rates[:k], seconds[:k], strict=True)]
    iv = ratio_interval(a, seconds[:k])
    assert iv.low <= iv.value <= iv.high and iv.value == pytest.approx(sum(a) / sum(seconds[:k]))


@settings(max_examples=60, deadline=None)
@given(rates=round_values, factor=st.floats(0.01, 100.0))
def test_a_ratio_interval_scales_with_its_data(rates, factor):
    seconds = [1.0] * len(rates)
    base = ratio_interval(rates, seconds)
    scaled = ratio_interval([r * factor for r in rates], seconds)
    assert scaled.value == pytest.approx(base.value * factor)
    assert scaled.half_width == pytest.approx(base.half_width * factor, rel=1e-9, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.floats(0.5, 2.0), min_size=3, max_size=8).filter(lambda r: np.ptp(r) > 1e-3)
)
def test_a_ratio_interval_narrows_with_more_rounds(rates):
    """The same rounds twice over: the same estimate, a narrower interval (se / sqrt(2) and a
    smaller t)."""
    seconds = [1.0] * len(rates)
    once, twice = ratio_interval(rates, seconds), ratio_interval(rates * 2, seconds * 2)
    assert twice.value == pytest.approx(once.value) and twice.half_width < once.half_width


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(0.1, 100.0), min_size=6, max_size=40),
    q=st.sampled_from([0.5, 0.9, 0.99]),
)
def test_a_quantile_interval_holds_its_estimate(values, q):
    rounds = [values[i::3] for i in range(3)]
    iv = quantile_interval(rounds, q)
    assert iv.low <= iv.value <= iv.high
    assert iv.value == pytest.approx(float(np.percentile(values, 100 * q)))


def test_an_interval_without_bounds_scales_and_inverts_its_value_and_keeps_its_reason():
    bare = Interval(5.0, method="m", rounds=1, reason="1 round(s)")
    scaled = bare.scaled(3.0)
    assert (scaled.value, scaled.method, scaled.rounds, scaled.reason, scaled.available) == (
        15.0,
        "m",
        1,
        "1 round(s)",
        False,
    )
    inv = bare.reciprocal()
    assert (inv.value, inv.method, inv.rounds, inv.reason, inv.available) == (
        0.2,
        "m",
        1,
        "1 round(s)",
        False,
    )
    assert Interval(5.0, method="m").reciprocal(10.0).reason == "interval reaches zero"
    zero = Interval(0.0).reciprocal()
    assert math.isnan(zero.value) and zero.reason == "interval reaches zero"
    assert not Interval(5.0, -1.0, 10.0).reciprocal().available


def test_reciprocal_defaults_to_one_over_the_interval():
    inv = Interval(4.0, 2.0, 8.0, level=0.9, method="m", rounds=3).reciprocal()
    assert (inv.value, inv.low, inv.high, inv.level, inv.rounds) == (0.25, 0.125, 0.5, 0.9, 3)
    scaled = Interval(4.0, 2.0, 8.0, level=0.9, method="m", rounds=3).scaled(0.5)
    assert (scaled.value, scaled.low, scaled.high, scaled.level, scaled.method, scaled.rounds) == (
        2.0,
        1.0,
        4.0,
        0.9,
        "m",
        3,
    )


def test_an_interval_round_trips_and_a_missing_one_reads_as_none():
    iv = Interval(4.0, 2.0, 8.0, level=0.9, method="m", rounds=3, reason="")
    assert Interval.from_dict(iv.to_dict()) == iv
    bare = Interval(4.0, level=0.9, method="m", rounds=1, reason="1 round(s)")
    assert Interval.from_dict(bare.to_dict()) == bare
    assert (
        Interval.from_dict({"value": None, "low": 1.0}) is None and Interval.from_dict({}) is None
    )
    assert Interval.from_dict(None) is None


def test_reciprocal_of_an_interval_below_one():
    inv = Interval(2.0, 0.5, 4.0).reciprocal()
    assert (inv.value, inv.low, inv.high) == (0.5, 0.25, 2.0)


def test_quantile_interval_order_statistics_of_distinct_calls():
    """Ten rounds of ten distinct calls (round r: r + 1, r + 11, ..., r + 91 ms), 1..100 in all. p50
    = 50.5: five calls of every round at or below it, so the share's se is the binomial floor 0.05
    and spread = t(0.975, 9) x 0.05 = 0.1131. Low: sorted[floor(0.3869 x 100) - 1] = sorted[37] = 38
    ms; high: sorted[ceil(0.6131 x 100)] = sorted[62] = 63 ms."""
    rounds = [[r + 10 * j + 1 for j in range(10)] for r in range(10)]
    got = quantile_interval(rounds, 0.5)
    assert got.value == 50.5 and (got.low, got.high) == (38.0, 63.0)


def test_bytemlperf_figures_of_no_calls_and_of_a_zero_window():
    f = bytemlperf_figures([[]], 4)
    assert (
        f["kept_calls"] == 0
        and f["kept"] == "every call (a thread made 40 calls or fewer: no trim)"
    )
    assert all(math.isnan(f[k]) for k in ("qps", "avg_latency_ms", "p99_latency_ms"))
    # calls that take no time: no window to divide by
    zero = bytemlperf_figures([[(5, 5), (5, 5)]], 4)
    assert math.isnan(zero["qps"]) and zero["avg_latency_ms"] == 0.0 and zero["kept_calls"] == 2


def test_pack_mode_says_which_share_it_keeps():
    assert bytemlperf_kept([_thread([1] * 10)] * 2, keep_fraction=0.6) == (
        [(2, 8), (2, 8)],
        "the middle 60 % of each thread's calls",
    )
    assert (
        bytemlperf_kept([_thread([1] * 10)], keep_fraction=0.8)[1]
        == "the middle 80 % of each thread's calls"
    )


def test_quantile_interval_when_the_rounds_disagree():
    """1..1000 ms in 10 rounds of 100; rounds take 80, 20, 80, 20, 80, 20, 80, 20, 50 and 50 of the
    500 calls at or below the median 500.5. Share per round 0.8 / 0.2 / 0.5: residuals +-30 calls (8
    rounds), se = sqrt(8 x 900 / 9 / 10) / 100 = 0.0894, above the binomial floor sqrt(0.25 / 1000);
    spread = t(0.975, 9) x 0.0894 = 0.2023. Low: sorted[floor(297.66) - 1] = 297; high: sorted[703]
    = 704."""
    low, high = list(range(1, 501)), list(range(501, 1001))
    rounds = []
    for c in (80, 20, 80, 20, 80, 20, 80, 20, 50, 50):
        rounds.append(low[:c] + high[: 100 - c])
        low, high = low[c:], high[100 - c :]
    se = math.sqrt(8 * 30**2 / 9 / 10) / 100
    spread = student_t.ppf(0.975, 9) * se
    assert math.floor((0.5 - spread) * 1000) - 1 == 296 and math.ceil((0.5 + spread) * 1000) == 703
    got = quantile_interval(rounds, 0.5)
    assert got.value == 500.5 and (got.low, got.high) == (297.0, 704.0) and got.rounds == 10


def test_quantile_interval_says_how_and_why_not():
    method = "Woodruff interval, share's error from rounds (cluster-robust)"
    assert quantile_interval([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 0.5).method == method
    empty = quantile_interval([[], []], 0.5)
    assert math.isnan(empty.value) and empty.method == method and empty.reason == "no calls"
    one = quantile_interval([[1.0, 2.0, 3.0]], 0.5)
    assert (one.value, one.method, one.rounds, one.available) == (2.0, method, 1, False)
    assert one.reason == "1 round(s): an interval needs at least 2"


def test_a_ratio_interval_says_how_and_why_not():
    one = ratio_interval([5.0], [2.0])
    assert one.value == 2.5 and one.low is None and one.rounds == 1
    assert one.method == "ratio estimator over rounds, t interval"
    assert one.reason == "1 round(s): an interval needs at least 2"
    assert (
        ratio_interval([1.0, 2.0], [1.0, 1.0]).method == "ratio estimator over rounds, t interval"
    )
    assert ratio_interval([1.0, 2.0], [1.0, 1.0], method="mine").method == "mine"
    assert math.isnan(ratio_interval([1.0, 2.0], [0.0, 0.0]).value)  # no time measured: no rate


def test_a_short_tail_joins_the_last_of_three_rounds():
    """Marks at 10, 20, 30 calls and one call after: that call joins round 3 (too few for a
    round)."""
    from kit.measure.intervals import round_groups

    thread = [(i, i + 1) for i in range(31)]
    groups, how = round_groups([thread], [[10], [20], [30]])
    assert how == "rounds of the timing loop" and [len(g[0]) for g in groups] == [10, 10, 11]


def test_bytemlperfs_p99_interval_keeps_its_reason():
    """Two calls (one block): no interval, and the reason quantile_interval gives travels with
    it."""
    from kit.measure.window import BatchMeasurement

    m = BatchMeasurement(
        batch_size=4, mode="single", threads=1, calls=[[(i * MS, (i + 1) * MS) for i in range(2)]]
    )
    p99 = m.intervals["bytemlperf_p99_latency_ms"]
    expected = quantile_interval([[1.0, 1.0]], 0.99, estimate=1.0).reason
    assert p99.low is None and expected and p99.reason == expected
