import pytest

from kit.studies.server import best_row, compare_rows, table_sizes
from kit.studies.serving.batcher import BatchPolicy
from kit.studies.serving.search import Probe, SearchResult
from kit.studies.serving.simulate import ServiceModel, predict_max_qps


def test_table_sizes_cover_every_policy():
    assert table_sizes([BatchPolicy(1, 0), BatchPolicy(6, 5)]) == [1, 2, 4, 6]


def test_rows_compare_loadgen_with_the_simulation():
    policy = BatchPolicy(1, 0.0)
    service = ServiceModel({1: 10.0}, resample=False)
    probes = [
        Probe(
            qps=50.0,
            p99_ms=30.0,
            passed=True,
            valid=False,
            reasons=["Early stopping satisfied: NO"],
            extra={"result": "INVALID"},
        ),
        Probe(
            qps=90.0,
            p99_ms=400.0,
            passed=False,
            valid=False,
            reasons=["Performance constraints satisfied: NO"],
            extra={"result": "INVALID"},
        ),
    ]
    search = SearchResult(50.0, probes[0], probes, "probe budget")
    rows = compare_rows(policy, search, service, sim_queries=5000, seed=0)
    assert [r["offered_qps"] for r in rows] == [50.0, 90.0]
    assert rows[0]["p99_error_pct"] == pytest.approx(100 * (rows[0]["sim_p99_ms"] - 30.0) / 30.0)
    predicted = predict_max_qps(service, policy, 100.0, queries=5000)
    best = best_row(policy, search, predicted, service.capacity(policy), 100.0)
    assert best["loadgen_best_qps"] == 50.0 and best["loadgen_result"] == "INVALID"
    assert best["prediction_error_pct"] == pytest.approx(100 * (predicted.best_qps - 50.0) / 50.0)
    none = best_row(
        policy, SearchResult(None, None, probes[1:], "none passed"), predicted, 100.0, 100.0
    )
    assert none["loadgen_result"] == "none passed"
    assert "Performance constraints" in none["loadgen_reasons"]
