"""Interval methods and the Mann-Whitney U test on synthetic data with a known answer."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from kit.measure.stats import (
    Interval,
    mann_whitney_u,
    quantile_interval,
    ratio_interval,
)


def test_ratio_interval_known_answer_uses_t_with_k_minus_1_degrees_of_freedom():
    """Hand-worked: rates 10, 12, 11, 9, 13 over 1 s rounds -> 11; residuals -1, 1, 0, -2, 2; se =
    sqrt(10 / 4 / 5) = 0.7071; t(0.975, 4) = 2.7764 (the table's value), so +-1.9632."""
    got = ratio_interval([10, 12, 11, 9, 13], [1, 1, 1, 1, 1])
    assert got.value == 11.0 and got.rounds == 5
    assert got.low == pytest.approx(11 - 2.7764 * math.sqrt(0.5), abs=2e-4)
    assert got.high == pytest.approx(11 + 2.7764 * math.sqrt(0.5), abs=2e-4)


def test_ratio_interval_covers_the_true_rate_95_percent_of_the_time():
    """Rounds with bursty (round-level, log-normal) rates: the true long-run rate is known."""
    rng = np.random.default_rng(0)
    mu, sigma, rounds, trials = 100.0, 0.3, 8, 2000
    true_rate = mu * math.exp(sigma**2 / 2)  # E[rate x duration] / E[duration], independent
    covered = 0
    for _ in range(trials):
        seconds = rng.uniform(0.9, 1.1, rounds)
        samples = mu * np.exp(sigma * rng.standard_normal(rounds)) * seconds
        covered += ratio_interval(samples, seconds).contains(true_rate)
    assert 0.925 <= covered / trials <= 0.975


def _clustered_uniform(rng, rounds, per_round, rho):
    """Latencies whose marginal is exactly U(0, 1) (so the q-quantile is q) but which are
    correlated within a round: a burst moves a whole round."""
    shared = rng.standard_normal((rounds, 1))
    z = rho * shared + math.sqrt(1 - rho**2) * rng.standard_normal((rounds, per_round))
    return np.vectorize(NormalDist().cdf)(z)


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_quantile_interval_covers_the_true_percentile_despite_bursts(q):
    rng = np.random.default_rng(1)
    trials, covered, naive_covered = 600, 0, 0
    for _ in range(trials):
        x = _clustered_uniform(rng, rounds=10, per_round=30, rho=0.5)
        covered += quantile_interval(list(x), q).contains(q)
        naive_covered += quantile_interval([x.ravel()[i::10] for i in range(10)], q).contains(q)
    assert 0.92 <= covered / trials <= 0.99
    # treating calls as independent (rounds shuffled into one another) covers far less often
    assert naive_covered / trials < 0.85


def test_an_interval_needs_two_rounds_and_says_so():
    iv = ratio_interval([10.0], [1.0])
    assert iv.value == 10.0 and not iv.available and "at least 2" in iv.reason
    assert iv.text(".1f") == "10.0"


def test_an_asymmetric_interval_is_shown_as_its_bounds_never_as_its_larger_side():
    """A report's P99 read '19.91 ± 0.5672' for [19.343, 19.910] (an upper bound of 20.48 the
    interval does not reach) and a p50 '199.9 ± 162.6' for [132.0, 362.4]: '±' showed the larger
    distance from the value."""
    assert Interval(19.910343, 19.343117, 19.910343).text() == "19.91 [19.34, 19.91]"
    assert Interval(199.872585, 131.985549, 362.426152).text() == "199.9 [132, 362.4]"
    assert Interval(13_499.0, 12_000.0, 14_100.0).text() == "13,499 [12,000, 14,100]"
    # a ratio interval, value +- t x se: both sides read the same, so '±'
    assert Interval(207.8207, 202.2731, 213.3683).text() == "207.8 ± 5.548"
    # symmetric to the digits shown, not exactly: '±'; to more digits it is not
    assert Interval(10.0, 9.499, 10.5).text(".2g") == "10 ± 0.5"
    assert Interval(10.0, 9.499, 10.5).text(".4g") == "10 [9.499, 10.5]"
    # the distances in their own format (the scorecard's two digits), the bounds in the value's
    rate = Interval(139.27, 90.5996, 187.945)
    assert rate.shown(lambda x: f"{x:.4g}", lambda h: f"{h:.2g}") == "139.3 ± 49"
    assert Interval(5.0).shown(str) == "5.0"


def test_interval_text_reciprocal_and_round_trip():
    iv = Interval(10.0, 9.0, 11.0, method="m", rounds=5)
    assert iv.text(".3g") == "10 ± 1" and iv.rel_half_width == pytest.approx(0.1)
    inv = iv.reciprocal(1000.0)
    assert (
        inv.value == 100.0
        and inv.low == pytest.approx(1000 / 11)
        and inv.high == pytest.approx(1000 / 9)
    )
    assert Interval.from_dict(iv.to_dict()) == iv


def test_mann_whitney_textbook_example():
    """scipy.stats.mannwhitneyu docs (Conover's example): U1 = 17, asymptotic p =
    0.11134688653314041."""
    r = mann_whitney_u([19, 22, 16, 29, 24], [20, 11, 17, 12])
    assert r.u == 17.0
    assert r.p_value == pytest.approx(0.11134688653314041, rel=1e-9)


def test_mann_whitney_ties_are_corrected():
    # all values tied: no evidence of a difference at all
    assert mann_whitney_u([1, 1, 1], [1, 1]).p_value == 1.0
    # hand-worked: x = [1, 2, 2], y = [2, 3, 3]; ranks 1, 3, 3 | 3, 5.5, 5.5 -> U1 = 7 - 6 = 1
    # tie term: (3^3 - 3) + (2^3 - 2) = 30; var = 9/12 * (7 - 30/30) = 4.5; z = (4.5 - 1 -
    # 0.5)/sqrt(4.5)
    r = mann_whitney_u([1, 2, 2], [2, 3, 3])
    assert r.u == 1.0
    assert r.p_value == pytest.approx(2 * (1 - NormalDist().cdf(3.0 / math.sqrt(4.5))), rel=1e-12)


def test_mann_whitney_false_alarm_rate_is_about_five_percent():
    rng = np.random.default_rng(2)
    trials = 2000
    alarms = sum(
        mann_whitney_u(rng.integers(0, 6, 12), rng.integers(0, 6, 12)).p_value < 0.05
        for _ in range(trials)
    )
    assert 0.025 <= alarms / trials <= 0.07
    shifted = mann_whitney_u(rng.normal(0, 1, 20), rng.normal(2, 1, 20))
    assert shifted.p_value < 1e-4 and shifted.z < 0
