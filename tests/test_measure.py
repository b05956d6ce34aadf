import time

import pytest

from kit.errors import InvalidParameter
from kit.measure import BatchMeasurement, MeasureConfig, bytemlperf_qps, measure
from kit.stats import LatencyStats


def test_stops_only_when_duration_and_count_are_both_met():
    calls = []
    cfg = MeasureConfig(warmup=2, min_duration_s=0.05, min_count=3)
    m = measure([lambda: calls.append(time.sleep(0.001))], 2, cfg)
    assert m.latency.count >= 3
    assert m.wall_time_s >= 0.05
    assert len(calls) == m.latency.count + 2  # warm-up calls are not timed


def test_count_rule_wins_when_calls_are_slow():
    m = measure([lambda: time.sleep(0.01)], 1, MeasureConfig(warmup=0, min_duration_s=0.0, min_count=4))
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
        measure([boom, lambda: None], 1, MeasureConfig(warmup=0, min_count=1, min_duration_s=0, clients=2))


def test_bytemlperf_qps_trims_twenty_calls_each_end():
    # 100 calls of 1 ms each, back to back; trimmed window is calls 20..79 -> 60 calls in 60 ms
    calls = [[(i * 1_000_000, (i + 1) * 1_000_000) for i in range(100)]]
    assert bytemlperf_qps(calls, batch_size=2) == pytest.approx(60 * 2 / 0.060)


def test_round_trip_keeps_raw_samples():
    m = BatchMeasurement(8, "single", 1, [[(0, 2_000_000), (2_000_000, 5_000_000)]])
    again = BatchMeasurement.from_dict(m.to_dict())
    assert again.latency == m.latency
    assert again.throughput == pytest.approx(16 / 0.005)


def test_latency_stats_percentiles():
    s = LatencyStats.from_ns([i * 1_000_000 for i in range(1, 101)])
    assert s.p50_ms == pytest.approx(50.5)
    assert s.p99_bytemlperf_ms == 100.0
    assert s.min_ms == 1.0 and s.max_ms == 100.0


@pytest.mark.parametrize("kwargs", [{"min_count": 0}, {"warmup": -1}, {"clients": 2, "replicas": 2},
                                    {"min_duration_s": 5, "max_duration_s": 1}])
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(InvalidParameter):
        MeasureConfig(**kwargs)
