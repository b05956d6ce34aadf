import pytest

from kit.errors import InvalidParameter
from kit.studies.serving.search import Probe, find_max_qps


def threshold_run(limit, calls=None):
    def run(qps):
        if calls is not None:
            calls.append(qps)
        return Probe(qps=qps, p99_ms=qps, passed=qps <= limit)

    return run


@pytest.mark.parametrize("start", [1.0, 30.0, 37.3, 500.0])
def test_finds_the_threshold_within_tolerance(start):
    result = find_max_qps(
        threshold_run(37.3), start_qps=start, rel_tol=0.02, max_probes=30, min_qps=0.01
    )
    assert result.stopped == "converged"
    assert result.best_qps <= 37.3
    assert result.best_qps >= 37.3 / 1.02 - 1e-9
    assert result.best.passed


def test_probes_only_narrow_the_bracket():
    calls = []
    result = find_max_qps(threshold_run(37.3, calls), start_qps=5.0, rel_tol=0.01, max_probes=30)
    passing = [q for q in calls if q <= 37.3]
    failing = [q for q in calls if q > 37.3]
    assert max(passing) < min(failing)
    assert result.best_qps == max(passing)
    lo, hi = 0.0, float("inf")  # after bracketing, every probe falls strictly inside it
    for q in calls:
        assert lo < q < hi
        lo, hi = (q, hi) if q <= 37.3 else (lo, q)


def test_none_passing_reports_none():
    result = find_max_qps(threshold_run(0.0), start_qps=10.0, min_qps=1.0, max_probes=20)
    assert result.best_qps is None and result.best is None
    assert result.stopped == "none passed"
    assert min(p.qps for p in result.probes) >= 1.0


def test_stops_at_the_upper_bound_when_all_pass():
    result = find_max_qps(threshold_run(1e9), start_qps=10.0, upper_qps=50.0, max_probes=20)
    assert result.best_qps == 50.0
    assert result.stopped == "upper bound"


def test_probe_budget_is_respected():
    result = find_max_qps(threshold_run(37.3), start_qps=1.0, rel_tol=1e-6, max_probes=4)
    assert len(result.probes) == 4
    assert result.stopped == "probe budget"
    assert result.best_qps <= 37.3


def test_rejects_bad_parameters():
    with pytest.raises(InvalidParameter):
        find_max_qps(threshold_run(1), start_qps=0.0)
