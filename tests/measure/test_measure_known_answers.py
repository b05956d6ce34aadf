"""Known answers for the timing summary (issue 33): a measurement's throughput, wall time, samples
and ByteMLPerf QPS from hand-made call times on two threads; the power summary's energy, mean power
and efficiency from hand-made sensor readings."""

from __future__ import annotations

import math

import pytest

from kit.errors import InvalidParameter
from kit.measure.power.base import Series
from kit.measure.power.summary import COUNTER, INTEGRAL, PowerSummary, indicative
from kit.measure.window import BatchMeasurement, bytemlperf_qps
from tests.c600_runs import calls_of

MS = 1_000_000


def two_threads() -> BatchMeasurement:
    """Thread A: 50 calls of 2 ms from t = 0; thread B: 50 calls of 4 ms from t = 10 ms."""
    return BatchMeasurement(
        batch_size=3,
        mode="clients",
        threads=2,
        calls=[calls_of([2.0] * 50), calls_of([4.0] * 50, 10 * MS)],
    )


def test_a_measurements_summary_over_every_call():
    m = two_threads()
    assert m.wall_time_s == 0.21  # first start 0, last end 10 + 200 ms: 210,000,000 ns / 1e9
    assert m.throughput == pytest.approx(3 * 100 / 0.210)
    assert m.samples == 300 and m.latency.count == 100
    assert m.latency.mean_ms == pytest.approx(3.0) and m.latency.max_ms == 4.0


def test_a_measurements_bytemlperf_figures_over_the_kept_calls():
    """Each thread keeps calls 20..29: A's from 40 ms, B's until 10 + 120 ms; 20 calls of 3
    samples."""
    m = two_threads()
    assert m.qps_bytemlperf == pytest.approx(20 * 3 / 0.090) == m.bytemlperf["qps"]
    assert bytemlperf_qps(m.calls, 3) == pytest.approx(20 * 3 / 0.090)
    assert (
        m.bytemlperf["avg_latency_ms"] == pytest.approx(3.0)
        and m.bytemlperf["p99_latency_ms"] == 4.0
    )


def test_pack_mode_keeps_its_fraction_through_the_measurement():
    m = BatchMeasurement(
        batch_size=1,
        mode="pack",
        threads=1,
        calls=[calls_of([float(k) for k in range(1, 11)])],
        extra={"bytemlperf_keep_fraction": 0.6},
    )
    # calls 3..8 ms
    assert m.bytemlperf["kept_calls"] == 6 and m.qps_bytemlperf == pytest.approx(6 / 0.033)


def test_the_precision_reached_is_the_throughputs_interval():
    m = BatchMeasurement(
        batch_size=1,
        mode="single",
        threads=1,
        calls=[calls_of([1.0] * 9 + [3.0] * 9)],
        precision={"target_ci": 0.05},
    )
    rel = m.intervals["throughput"].rel_half_width
    assert rel > 0.05 and m.precision == {
        "target_ci": 0.05,
        "reached": rel,
        "rounds": 6,
        "met": False,
        "stopped_by": "",
    }


def test_a_round_trip_keeps_every_figure():
    m = two_threads()
    again = BatchMeasurement.from_dict(m.to_dict())
    assert (again.throughput, again.qps_bytemlperf, again.latency) == (
        m.throughput,
        m.qps_bytemlperf,
        m.latency,
    )


# --- power ---------------------------------------------------------------------------------------


def series(points, energy=None) -> Series:
    """A sensor's readings: (seconds, watts or None) and, for a counter, joules (or None) at
    each."""
    return Series(
        [t for t, _ in points], [w for _, w in points], list(energy or [None] * len(points))
    )


def test_a_constant_150_w_over_2_s():
    s = PowerSummary.from_series(
        series([(0.0, 150.0), (1.0, 150.0), (2.0, 150.0)]),
        counter=False,
        sensor="const",
        sampler="test",
        samples_processed=600,
    )
    assert s.method == "measured" and s.energy_method == INTEGRAL
    assert (
        s.energy_j == 300.0 and s.mean_w == 150.0 and s.duration_s == 2.0 and s.hz_achieved == 1.0
    )
    assert s.samples_per_s == 300.0 and s.samples_per_s_per_w == 2.0 and s.samples_per_j == 2.0
    assert s.n_samples == 3 and (s.min_w, s.max_w) == (150.0, 150.0)


def test_an_energy_counter_gives_the_energy_and_the_power_between_readings():
    """Counter at 0, 1, 3 s reads 10, 110, 510 J: 500 J over 3 s; power 100 W then 200 W
    (midpoints)."""
    pts = [(0.0, None), (1.0, None), (3.0, None)]
    s = PowerSummary.from_series(
        series(pts, energy=[10.0, 110.0, 510.0]), counter=True, sensor="rapl", sampler="rapl"
    )
    assert s.energy_method == COUNTER and s.energy_j == 500.0 and s.mean_w == pytest.approx(500 / 3)
    assert s.series_t_s == [0.5, 2.0] and s.series_w == [100.0, 200.0]
    assert s.mean_w_samples == 150.0 and (s.min_w, s.max_w) == (100.0, 200.0)


def test_a_counter_with_gauge_readings_keeps_the_gauge():
    s = PowerSummary.from_series(
        series([(0.0, 90.0), (2.0, 110.0)], energy=[0.0, 220.0]),
        counter=True,
        sensor="x",
        sampler="x",
    )
    assert s.energy_j == 220.0 and s.mean_w == 110.0 and s.series_w == [90.0, 110.0]


def test_a_given_throughput_is_the_efficiencys_numerator():
    s = PowerSummary.from_series(
        series([(0.0, 100.0), (4.0, 100.0)]), counter=False, sensor="x", sampler="x"
    )
    s.with_samples(800, throughput=250.0)
    assert s.samples_per_s == 250.0 and s.samples_per_s_per_w == 2.5 and s.samples_per_j == 2.0
    with pytest.raises(InvalidParameter, match=r"^invalid samples_processed=-1: >= 0$"):
        s.with_samples(-1)
    # none processed: allowed
    assert s.with_samples(0).samples_processed == 0 and s.samples_per_j == 0.0


def test_too_few_samples_are_unavailable_with_the_reason():
    s = PowerSummary.from_series(
        series([(0.0, 100.0)]),
        counter=False,
        sensor="s1",
        sampler="p1",
        samples_processed=5,
        hz_requested=20.0,
    )
    assert s.method == "unavailable" and s.reason == "fewer than two readable samples in the window"
    assert (s.sensor, s.sampler, s.hz_requested, s.duration_s) == ("s1", "p1", 20.0, 0.0)
    assert s.samples_per_s is None and s.n_samples == 1


@pytest.mark.parametrize(
    "points, energy, counter",
    [
        ([], None, False),  # no reading at all
        # one readable watt figure over a second: no integral
        ([(0.0, 100.0), (1.0, None)], None, False),
        ([(1.0, 100.0), (1.0, 100.0)], [0.0, 10.0], True),  # two readings at one instant: no window
        # a counter's readings share one time
        ([(0.0, None), (1.0, None), (1.0, None)], [None, 0.0, 10.0], True),
    ],
)
def test_a_window_without_two_readings_in_time_is_unavailable(points, energy, counter):
    s = PowerSummary.from_series(series(points, energy), counter=counter, sensor="x", sampler="x")
    assert s.method == "unavailable" and s.reason == "fewer than two readable samples in the window"


def test_a_counter_skips_readings_at_the_same_time():
    s = PowerSummary.from_series(
        series(
            [(0.0, None), (1.0, None), (1.0, None), (2.0, None)], energy=[0.0, 10.0, 20.0, 50.0]
        ),
        counter=True,
        sensor="x",
        sampler="x",
    )
    assert s.energy_j == 50.0 and s.series_w == [10.0, 30.0] and s.series_t_s == [0.5, 1.5]
    none = PowerSummary.unavailable("no sensor", duration_s=2.0)
    assert (none.method, none.sensor, none.sampler, none.reason) == (
        "unavailable",
        "none",
        "unavailable",
        "no sensor",
    )
    assert none.with_samples(10).samples_per_s is None and none.samples_processed == 10


def test_a_summary_round_trips_with_rounded_series():
    s = PowerSummary.from_series(
        series([(0.0, 100.123456789), (0.7000001234, 100.0)]),
        counter=False,
        sensor="x",
        sampler="x",
    )
    d = s.to_dict()
    assert d["series_t_s"] == [0.0, 0.7] and d["series_w"] == [100.1235, 100.0]
    assert PowerSummary.from_dict(d).mean_w == s.mean_w


def test_the_method_and_reason_are_checked():
    with pytest.raises(
        InvalidParameter,
        match=r"^invalid method='guessed': one of measured, unavailable, estimated$",
    ):
        PowerSummary("guessed", "x", "x")
    with pytest.raises(
        InvalidParameter, match=r"^invalid reason=None: an unavailable figure must say why$"
    ):
        PowerSummary("unavailable", "x", "x")
    with pytest.raises(
        InvalidParameter, match=r"^invalid reason='': an unavailable figure must say why$"
    ):
        PowerSummary("unavailable", "x", "x", reason="")


def test_indicative_only_for_a_measured_window_its_sensor_does_not_resolve():
    short = {"method": "measured", "window_resolved": False, "duration_s": 2.04, "sampler": "nvml"}
    assert (
        indicative(short)
        == "indicative only: a 2.0 s power window, shorter than the sensor (nvml) resolves"
    )
    assert indicative({**short, "duration_s": None, "sampler": None}) == (
        "indicative only: the power window, shorter than the sensor (?) resolves"
    )
    assert (
        indicative({**short, "window_resolved": None}) == ""
        and indicative({**short, "method": "estimated"}) == ""
    )
    assert indicative(None) == "" and indicative({**short, "window_resolved": True}) == ""


# --- rounds --------------------------------------------------------------------------------------


def test_calls_after_the_last_round_join_it_or_make_their_own():
    from kit.measure.intervals import BLOCKS, ROUNDS, kept_marks, round_groups

    calls = [calls_of([1.0] * 10)]
    # one call after the last mark: it joins that round
    groups, how = round_groups(calls, [[4], [9]])
    assert how == ROUNDS and [len(g[0]) for g in groups] == [4, 6]
    groups, _ = round_groups(calls, [[4]])  # six calls after it: a round of their own
    assert [len(g[0]) for g in groups] == [4, 6]
    groups, _ = round_groups(calls, [[3], [6]])  # four after: their own round
    assert [len(g[0]) for g in groups] == [3, 3, 4]
    groups, how = round_groups(calls, None)  # no marks: 3 blocks of 3, 3 and 4 calls
    assert how == BLOCKS and [len(g[0]) for g in groups] == [3, 3, 4]
    groups, how = round_groups([calls_of([1.0] * 5)], None)  # too few calls for two blocks
    assert how == BLOCKS and len(groups) == 1
    # rounds moved into the kept calls
    assert kept_marks([[30], [60], [100]], [(20, 80)]) == [[10], [40], [60]]
    assert kept_marks([[10], [60]], [(20, 80)]) == [[40]]  # a round with no kept call is dropped
    assert kept_marks(None, [(0, 5)]) is None


def test_a_measurements_latency_intervals_are_woodruffs_over_its_rounds():
    """One thread, 30 calls of 1..30 ms in rounds of 10: each percentile's interval is the Woodruff
    interval (known-answer tested in test_stats_known_answers) of the three rounds' call times, at
    the percentile numpy gives for all 30 calls, and says it was built over the timing loop's
    rounds."""
    from kit.measure.intervals import ROUNDS
    from kit.measure.stats import quantile_interval

    m = BatchMeasurement(
        batch_size=2,
        mode="single",
        threads=1,
        calls=[calls_of([float(k) for k in range(1, 31)])],
        rounds=[[10], [20]],
    )
    rounds = [
        [float(k) for k in range(1, 11)],
        [float(k) for k in range(11, 21)],
        [float(k) for k in range(21, 31)],
    ]
    for name, q, estimate in (
        ("p50_ms", 0.5, 15.5),
        ("p90_ms", 0.9, 27.1),
        ("p99_ms", 0.99, 29.71),
        ("p99_bytemlperf_ms", 0.99, 30.0),
    ):
        want = quantile_interval(rounds, q, estimate=estimate)
        got = m.intervals[name]
        assert got.value == pytest.approx(estimate) and (got.low, got.high) == (
            want.low,
            want.high,
        ), name
        assert (got.level, got.rounds, got.reason) == (
            0.95,
            3,
            "",
        ) and got.method == f"{want.method} over {ROUNDS}"
    mean = m.intervals["mean_ms"]
    # ratio of round sums 55, 155, 255 ms to 10 calls each: t(0.975, 2) x se
    half = mean.high - 15.5
    assert mean.value == 15.5 and half == pytest.approx(4.302652729911275 * 10 * math.sqrt(1 / 3))
    assert (mean.level, mean.rounds, mean.reason) == (0.95, 3, "") and ROUNDS in mean.method


def test_the_efficiency_interval_is_the_throughputs_relative_one():
    m = BatchMeasurement(
        batch_size=2, mode="single", threads=1, calls=[calls_of([1.0] * 9 + [3.0] * 9)]
    )
    m.power = {"method": "measured", "samples_per_s_per_w": 5.0}
    from kit.measure.intervals import measurement_intervals

    ivs = measurement_intervals(m)
    rel = ivs["throughput"].rel_half_width
    eff = ivs["samples_per_s_per_w"]
    assert (eff.value, eff.low, eff.high) == (
        5.0,
        pytest.approx(5 * (1 - rel)),
        pytest.approx(5 * (1 + rel)),
    )
    assert (
        eff.method
        == "the throughput's relative interval (the power reading's own variation is not included)"
    )
    assert eff.rounds == 6 and ivs["qps_bytemlperf"].rel_half_width == pytest.approx(rel)
    assert ivs["throughput"].method == (
        "throughput of 6 blocks of consecutive calls cut after the run: ratio "
        "estimator (samples / seconds), t interval; relative width applied"
    )
    m.power = {"method": "unavailable", "samples_per_s_per_w": 5.0}
    assert "samples_per_s_per_w" not in measurement_intervals(m)


def test_round_rates_sum_the_threads_and_skip_empty_ones():
    from kit.measure.intervals import round_rates

    b = [(0, 1 * MS), (1 * MS, 2 * MS)]  # 2 calls in 2 ms: 1,000 calls/s
    # an empty thread first: the next still counts
    assert round_rates([[[], b]]) == [(1000.0, 0.002)]
    # a zero-length span adds no rate
    assert round_rates([[[(5 * MS, 5 * MS)], b]]) == [(1000.0, 0.005)]
    assert round_rates([[[], []]]) == [(0.0, 0.0)]
    a = [(0, 1 * MS), (1 * MS, 2 * MS), (2 * MS, 3 * MS), (3 * MS, 4 * MS)]  # 4 calls in 4 ms
    assert round_rates([[a, b]]) == [(2000.0, 0.004)]


def test_the_throughputs_interval_sums_unequal_clients_per_round():
    """Client A: 3 calls of 1 ms, then 3 of 2 ms; client B: 3 + 3 calls of 2 ms; rounds after 3
    calls each. Round rates: 3/0.003 + 3/0.006 = 1,500 calls/s over 6 ms, then 500 + 500 = 1,000
    over 6 ms."""
    a, b = calls_of([1.0] * 3 + [2.0] * 3), calls_of([2.0] * 6)
    m = BatchMeasurement(batch_size=1, mode="clients", threads=2, calls=[a, b], rounds=[[3, 3]])
    r = (1500 * 0.006 + 1000 * 0.006) / 0.012  # 1,250
    d = [1500 * 0.006 - r * 0.006, 1000 * 0.006 - r * 0.006]
    half = 12.706204736174698 * math.sqrt((d[0] ** 2 + d[1] ** 2) / 1 / 2) / 0.006
    assert m.intervals["throughput"].rel_half_width == pytest.approx(half / r)


def test_a_measurement_of_one_round_says_why_it_has_no_interval():
    m = BatchMeasurement(
        batch_size=1, mode="single", threads=1, calls=[calls_of([1.0, 2.0, 3.0, 4.0, 5.0])]
    )  # 5 calls: one block
    why = "1 round(s): an interval needs at least 2"
    for name in ("mean_ms", "p50_ms", "p99_ms", "bytemlperf_avg_latency_ms"):
        assert not m.intervals[name].available and m.intervals[name].reason == why, name
    assert m.intervals["throughput"].reason == why and m.intervals["mean_ms"].value == 3.0


def test_calls_that_take_no_time_have_no_throughput():
    m = BatchMeasurement(batch_size=2, mode="single", threads=1, calls=[[(5, 5), (5, 5), (5, 5)]])
    assert m.wall_time_s == 0.0 and math.isnan(m.throughput) and math.isnan(m.qps_bytemlperf)


def test_more_round_cuts_and_kept_marks():
    from kit.measure.intervals import BLOCKS, kept_marks, round_groups

    # exactly three calls after: their own round
    groups, _ = round_groups([calls_of([1.0] * 9)], [[3], [6]])
    assert [len(g[0]) for g in groups] == [3, 3, 3]
    assert round_groups([], None) == ([[]], BLOCKS)
    # a round keeping a single call stays
    assert kept_marks([[21], [60]], [(20, 80)]) == [[1], [40]]


def test_bytemlperf_intervals_in_pack_mode_are_over_the_kept_middle():
    """One thread of 10 calls of 1..10 ms, pack mode keeping the middle 60 %: calls 3..8 ms, cut
    into 2 blocks (3 + 3). AVG = 5.5; its interval: block sums 12 and 21 over 3 calls each, t(0.975,
    1): 5.5 -/+ 12.706 x 1.5. P99 = sorted(kept)[int(5.94)] = 8 ms, its Woodruff interval over the
    blocks."""
    from kit.measure.intervals import BLOCKS
    from kit.measure.stats import quantile_interval

    m = BatchMeasurement(
        batch_size=1,
        mode="pack",
        threads=1,
        calls=[calls_of([float(k) for k in range(1, 11)])],
        extra={"bytemlperf_keep_fraction": 0.6},
    )
    avg, p99 = m.intervals["bytemlperf_avg_latency_ms"], m.intervals["bytemlperf_p99_latency_ms"]
    t1 = 12.706204736174698
    assert avg.value == 5.5 and (avg.low, avg.high) == (
        pytest.approx(5.5 - t1 * 1.5),
        pytest.approx(5.5 + t1 * 1.5),
    )
    assert (avg.level, avg.rounds, avg.reason) == (0.95, 2, "")
    assert avg.method == f"ratio estimator over {BLOCKS} of the calls ByteMLPerf keeps, t interval"
    want = quantile_interval([[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]], 0.99, estimate=8.0)
    assert (p99.value, p99.low, p99.high, p99.level, p99.rounds, p99.reason) == (
        8.0,
        want.low,
        want.high,
        0.95,
        2,
        "",
    )
    assert p99.method == f"{want.method} over {BLOCKS} of the calls ByteMLPerf keeps"


def test_relative_intervals_without_a_value_or_a_width():
    from kit.measure.intervals import _relative

    none = _relative(None, 0.1, 3, "m")
    assert math.isnan(none.value) and (none.method, none.rounds, none.reason, none.available) == (
        "m",
        3,
        "no value",
        False,
    )
    nan = _relative(float("nan"), 0.1, 3, "m")
    assert not nan.available and nan.reason == "no value"
    bare = _relative(5.0, None, 1, "m")
    assert (bare.value, bare.method, bare.rounds, bare.available) == (5.0, "m", 1, False)
    assert bare.reason == "1 round(s): an interval needs at least 2"
    full = _relative(5.0, 0.2, 4, "m")
    assert (full.low, full.high, full.rounds, full.method) == (4.0, 6.0, 4, "m")


def test_the_precision_reached_and_whether_the_target_was_met():
    from kit.measure.intervals import precision_reached
    from kit.measure.stats import Interval

    at = precision_reached(
        {"target_ci": 0.25, "stopped_by": "target reached"}, Interval(10.0, 7.5, 12.5, rounds=5)
    )
    assert at == {
        "target_ci": 0.25,
        "reached": 0.25,
        "rounds": 5,
        "met": True,
        "stopped_by": "target reached",
    }
    # no interval: missed
    assert precision_reached({"target_ci": 0.05}, Interval(10.0, rounds=1))["met"] is False
    none = precision_reached({}, Interval(10.0, 9.0, 11.0, rounds=3))
    assert none == {"target_ci": 0.0, "reached": 0.1, "rounds": 3, "met": None, "stopped_by": ""}
    limited = precision_reached(
        {"target_ci": 0.02, "stopped_by": "time limit", "limit_s": 10.0},
        Interval(10.0, 9.0, 11.0, rounds=3),
    )
    assert limited == {
        "target_ci": 0.02,
        "reached": 0.1,
        "rounds": 3,
        "met": False,
        "stopped_by": "time limit",
        # the limit the window ran under (raised where stretched for power)
        "limit_s": 10.0,
    }


def test_efficiency_comes_from_the_energy_based_mean_power_not_the_plain_sample_mean():
    """Samples bunched at the start of the window (100 W three times in 0.2 s, then 300 W at 10 s):
    the trapezoid gives 10 + 10 + 9.8 x 200 = 1980 J over 10 s, 198 W; the plain sample mean is 150
    W."""
    s = PowerSummary.from_series(
        series([(0.0, 100.0), (0.1, 100.0), (0.2, 100.0), (10.0, 300.0)]),
        counter=False,
        sensor="x",
        sampler="x",
        samples_processed=1000,
    )
    assert (
        s.energy_j == pytest.approx(1980.0)
        and s.mean_w == pytest.approx(198.0)
        and s.mean_w_samples == 150.0
    )
    assert s.samples_per_s == 100.0
    assert s.samples_per_s_per_w == pytest.approx(100.0 / 198.0)  # not 100 / 150
    # the same number over one window
    assert s.samples_per_s_per_w == pytest.approx(s.samples_per_j)


def test_bytemlperf_trims_no_client_when_any_client_made_40_calls_or_fewer():
    """ByteMLPerf drops 20 calls at each end of every client only when each has more than 40: one
    short client (30 calls) means no client is trimmed (a 40-call trim of 30 calls would keep
    none)."""
    from kit.measure.bytemlperf import bytemlperf_kept

    ranges, how = bytemlperf_kept([[(0, 1)] * 50, [(0, 1)] * 30])
    assert ranges == [(0, 50), (0, 30)] and how.startswith("every call")
    # 40: no trim at all
    assert bytemlperf_kept([[(0, 1)] * 40, [(0, 1)] * 50])[0] == [(0, 40), (0, 50)]
    assert bytemlperf_kept([[(0, 1)] * 41, [(0, 1)] * 50])[0] == [(20, 21), (20, 30)]
