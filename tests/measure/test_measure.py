import time

import numpy as np
import pytest

from kit.errors import InvalidParameter
from kit.measure.stats import LatencyStats
from kit.measure.window import BatchMeasurement, MeasureConfig, bytemlperf_qps, measure


def test_stops_only_when_duration_and_count_are_both_met():
    calls = []
    cfg = MeasureConfig(warmup=2, min_duration_s=0.05, min_count=3)
    m = measure([lambda: calls.append(time.sleep(0.001))], 2, cfg)
    assert m.latency.count >= 3
    assert m.wall_time_s >= 0.05
    assert len(calls) == m.latency.count + 2  # warm-up calls are not timed


def test_count_rule_wins_when_calls_are_slow():
    m = measure(
        [lambda: time.sleep(0.01)], 1, MeasureConfig(warmup=0, min_duration_s=0.0, min_count=4)
    )
    assert m.latency.count == 4


def test_clients_share_work_and_throughput_counts_all_threads():
    cfg = MeasureConfig(warmup=0, min_duration_s=0.05, min_count=5, clients=3)
    m = measure([lambda: time.sleep(0.002)] * 3, 4, cfg)
    assert m.mode == "clients" and m.threads == 3
    assert m.samples == 4 * m.latency.count
    # three sleeping threads overlap: throughput well above one thread's 4 / 2 ms
    assert m.throughput > 1.5 * 4 / 0.002 / 1.2


def test_error_in_a_thread_is_raised():
    def boom():
        raise RuntimeError("device lost")

    with pytest.raises(RuntimeError, match="device lost"):
        measure(
            [boom, lambda: None],
            1,
            MeasureConfig(warmup=0, min_count=1, min_duration_s=0, clients=2),
        )


def test_bytemlperf_qps_trims_twenty_calls_each_end():
    # 100 calls of 1 ms each, back to back; trimmed window is calls 20..79 -> 60 calls in 60 ms
    calls = [[(i * 1_000_000, (i + 1) * 1_000_000) for i in range(100)]]
    assert bytemlperf_qps(calls, batch_size=2) == pytest.approx(60 * 2 / 0.060)


def test_round_trip_keeps_raw_samples():
    m = BatchMeasurement(
        batch_size=8, mode="single", threads=1, calls=[[(0, 2_000_000), (2_000_000, 5_000_000)]]
    )
    again = BatchMeasurement.from_dict(m.to_dict())
    assert again.latency == m.latency
    assert again.throughput == pytest.approx(16 / 0.005)


def test_latency_stats_percentiles():
    s = LatencyStats.from_ns([i * 1_000_000 for i in range(1, 101)])
    assert s.p50_ms == pytest.approx(50.5)
    assert s.p99_bytemlperf_ms == 100.0
    assert s.min_ms == 1.0 and s.max_ms == 100.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_count": 0},
        {"warmup": -1},
        {"clients": 2, "replicas": 2},
        {"min_duration_s": 5, "max_duration_s": 1},
    ],
)
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(InvalidParameter):
        MeasureConfig(**kwargs)


def test_rounds_give_every_figure_an_interval():
    m = measure(
        [lambda: time.sleep(0.002)], 4, MeasureConfig(warmup=0, min_duration_s=0.3, min_count=3)
    )
    assert m.rounds and len(m.rounds) >= 2
    for name in ("throughput", "qps_bytemlperf", "mean_ms", "p50_ms", "p90_ms", "p99_ms"):
        iv = m.intervals[name]
        assert iv.available and iv.low <= iv.value <= iv.high, name
        assert "rounds of the timing loop" in iv.method
    assert m.precision["stopped_by"] == "minimums met" and m.precision["met"] is None


def test_adaptive_length_stops_at_the_target():
    cfg = MeasureConfig(
        warmup=0,
        min_duration_s=0.1,
        min_count=3,
        max_duration_s=20,
        target_ci=0.05,
        min_rounds=4,
        round_s=0.05,
    )
    m = measure([lambda: time.sleep(0.002)], 1, cfg)
    p = m.precision
    assert p["stopped_by"] == "target reached" and p["met"] is True
    assert p["reached"] <= 0.05 and p["rounds"] >= 4
    assert m.wall_time_s < 20


def test_adaptive_length_stops_at_the_time_limit_and_says_the_target_was_missed():
    rng = np.random.default_rng(0)
    cfg = MeasureConfig(
        warmup=0, min_duration_s=0.1, min_count=3, max_duration_s=0.6, target_ci=0.001, round_s=0.05
    )
    m = measure([lambda: time.sleep(float(rng.choice([0.001, 0.02])))], 1, cfg)
    p = m.precision
    assert p["stopped_by"] == "time limit" and p["met"] is False and p["reached"] > 0.001
    assert 0.6 <= m.wall_time_s < 1.5


def test_calls_longer_than_rounds_still_give_an_interval_past_the_time_limit():
    """RoFormer and VideoBERT take 2-3 s a call against a 5 s limit: one call makes a round, and the
    limit waits for three rounds so the figure has an interval."""
    cfg = MeasureConfig(
        warmup=0, min_duration_s=0.05, min_count=1, max_duration_s=0.1, target_ci=0.05, round_s=0.01
    )
    m = measure([lambda: time.sleep(0.06)], 2, cfg)
    assert len(m.rounds) >= 3 and m.precision["stopped_by"] == "time limit"
    assert m.intervals["throughput"].available and m.wall_time_s < 3 * 0.1 + 0.1
    quick = MeasureConfig(
        warmup=0, min_duration_s=0.05, min_count=1, max_duration_s=10, target_ci=0.05, round_s=0.02
    )
    short = measure([lambda: None], 1, quick)  # far shorter than a round even on a loaded machine
    ends = [r[0] for r in short.rounds]
    # short calls: 3 a round
    assert all(b - a >= 3 for a, b in zip([0, *ends[:-1]], ends, strict=True))


def test_threads_share_rounds_and_the_stop():
    cfg = MeasureConfig(
        warmup=0, min_duration_s=0.2, min_count=3, clients=3, target_ci=0.2, round_s=0.03
    )
    m = measure([lambda: time.sleep(0.002)] * 3, 2, cfg)
    assert all(len(mark) == 3 for mark in m.rounds)
    assert m.intervals["throughput"].available
    ends = [t[-1][1] for t in m.calls]
    assert (max(ends) - min(ends)) / 1e9 < 0.05  # the threads stopped together


def test_round_trip_keeps_intervals_and_results_without_rounds_get_blocks():
    m = measure(
        [lambda: time.sleep(0.001)], 2, MeasureConfig(warmup=0, min_duration_s=0.2, min_count=3)
    )
    again = BatchMeasurement.from_dict(m.to_dict())
    assert again.intervals == m.intervals and again.precision == m.precision
    # e.g. from an out-of-process backend
    bare = BatchMeasurement(batch_size=2, mode="single", threads=1, calls=m.calls)
    assert bare.intervals["throughput"].available
    assert "blocks of consecutive calls" in bare.intervals["throughput"].method


def test_timed_window_records_noise():
    from kit.measure.window import timed_window

    m = timed_window(
        [lambda: time.sleep(0.001)], 1, MeasureConfig(warmup=0, min_duration_s=0.1, min_count=3)
    )
    assert set(m.noise.to_dict()) >= {"noisy", "reasons", "thresholds", "freq_mhz"}
    assert m.to_dict()["noise"] == m.noise.to_dict()
    assert BatchMeasurement.from_dict(m.to_dict()).noise == m.noise
