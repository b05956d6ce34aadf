import pytest

from kit.errors import InvalidParameter
from kit.studies.server import PREDICTION_LABEL, c2_prediction, per_ipu_table
from kit.studies.serving.batcher import BatchPolicy
from kit.studies.serving.simulate import ServiceModel, predict_max_qps, simulate


@pytest.mark.parametrize("rho", [0.3, 0.7])
def test_md1_mean_latency_matches_pollaczek_khinchine(rho):
    service_ms = 10.0
    qps = rho / (service_ms / 1e3)
    r = simulate({1: service_ms}, BatchPolicy(1, 0.0), qps, queries=100_000, seed=1)
    expected = service_ms + rho * service_ms / (2 * (1 - rho))  # M/D/1: D + rho D / 2(1 - rho)
    assert r.mean_ms == pytest.approx(expected, rel=0.04)
    assert r.mean_batch == 1.0


def test_lone_queries_wait_for_the_timeout():
    r = simulate({1: 2.0, 8: 10.0}, BatchPolicy(8, 20.0), qps=0.5, queries=2000)
    assert r.p50_ms == pytest.approx(22.0, rel=0.02)  # T + L(1): nobody joins the batch
    assert r.mean_batch < 1.1


def test_overload_fills_batches_and_saturates_at_capacity():
    table = {1: 2.0, 4: 4.0}
    policy = BatchPolicy(4, 5.0)
    service = ServiceModel(table, resample=False)
    assert service.capacity(policy) == pytest.approx(1000.0)
    assert service.median(2) == pytest.approx((2 + 2 / 3) / 1e3)  # seconds, linear between 1 and 4
    r = simulate(service, policy, qps=2000, queries=20000)
    assert r.mean_batch == pytest.approx(4.0, rel=0.01)
    assert r.completed_qps == pytest.approx(1000.0, rel=0.02)


def test_two_servers_double_capacity():
    policy = BatchPolicy(1, 0.0)
    one = simulate({1: 10.0}, policy, qps=150, queries=20000, servers=2)
    assert one.completed_qps == pytest.approx(150, rel=0.05)
    assert one.p99_ms < 100
    assert ServiceModel({1: 10.0}).capacity(policy, servers=2) == pytest.approx(200.0)


def test_predicted_max_qps_respects_the_bound():
    pred = predict_max_qps({1: 10.0}, BatchPolicy(1, 0.0), bound_ms=50.0, queries=20000)
    assert pred.best.p99_ms <= 50.0
    assert 0 < pred.best_qps < 100.0
    failing = [p.qps for p in pred.probes if not p.passed]
    assert failing and min(failing) > pred.best_qps


def test_c2_prediction_is_labelled_and_per_ipu():
    card = {2: 1.36, 4: 1.94, 6: 2.82, 8: 3.32, 10: 4.13, 12: 4.75}
    assert per_ipu_table(card) == {1: 1.36, 2: 1.94, 3: 2.82, 4: 3.32, 5: 4.13, 6: 4.75}
    rows = c2_prediction(card, [BatchPolicy(1, 0.0), BatchPolicy(6, 5.0)], 100.0, queries=5000)
    assert all(r["label"] == PREDICTION_LABEL and r["servers"] == 2 for r in rows)
    assert rows[0]["capacity_qps"] == pytest.approx(2 / 1.36e-3)  # two IPUs, 1 image per 1.36 ms
    assert all(r["predicted_max_qps"] <= r["capacity_qps"] for r in rows)


def test_rejects_empty_or_nonpositive_tables():
    with pytest.raises(InvalidParameter):
        ServiceModel({})
    with pytest.raises(InvalidParameter):
        ServiceModel({1: 0.0})
