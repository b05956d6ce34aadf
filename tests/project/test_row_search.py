"""benchmarks/row_search.py judges each target by the ratio's 95 % interval over paired rounds."""

import pytest

from benchmarks.row_search import ROFORMER_TARGET, round_ratio, verdicts


def row(best: list[float], today: list[float], model: str = "roformer-tf-fp32") -> dict:
    ratio = round_ratio(best, today)
    return {
        "model": model,
        "published": "FP16",
        "ratio": ratio.value,
        "ratio_low": ratio.low,
        "ratio_high": ratio.high,
    }


def test_one_configuration_on_both_sides_is_exactly_one_and_not_slower():
    r = row([10.0, 12.0, 9.0], [], model="resnet50-torch-fp32")
    assert (r["ratio"], r["ratio_low"], r["ratio_high"]) == (1.0, 1.0, 1.0)
    assert verdicts(r) == ["not slower than today's mapping (ratio >= 1.0, 95 % CI): met"]


def test_the_ratio_is_the_sum_over_the_rounds_with_a_t_interval():
    r = row([12.0, 13.0, 12.5, 12.5], [10.0, 10.0, 10.0, 10.0])
    assert r["ratio"] == pytest.approx(1.25)
    assert r["ratio_low"] < 1.25 < r["ratio_high"]


def test_a_roformer_median_above_its_target_with_a_straddling_interval_is_inconclusive():
    # per-round ratios 1.30, 1.00, 1.30, 1.00: the median (1.15) alone would read 'met'
    r = row([13.0, 10.0, 13.0, 10.0], [10.0] * 4)
    assert r["ratio"] == pytest.approx(ROFORMER_TARGET)
    assert f"roformer >= {ROFORMER_TARGET}x (95 % CI): inconclusive" in verdicts(r)


def test_a_roformer_row_above_its_target_in_every_round_is_met_and_one_below_is_missed():
    assert f"roformer >= {ROFORMER_TARGET}x (95 % CI): met" in verdicts(
        row([13.0, 13.1, 12.9, 13.0], [10.0] * 4)
    )
    slower = verdicts(row([9.0, 9.1, 8.9, 9.0], [10.0] * 4))
    assert "not slower than today's mapping (ratio >= 1.0, 95 % CI): MISSED" in slower
    assert f"roformer >= {ROFORMER_TARGET}x (95 % CI): MISSED" in slower


def test_one_round_gives_no_interval_and_no_verdict_but_inconclusive():
    r = row([13.0], [10.0])
    assert r["ratio_low"] is None
    assert verdicts(r)[0].endswith(": inconclusive")
