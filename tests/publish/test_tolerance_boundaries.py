"""Every tolerance of the verdict at its boundary (issue 33): exactly 10 % from the published figure
(the figure itself and the measured interval's nearer end), exactly 1.1x the published numeric
diff, exactly 99 % of the published accuracy; and a hair beyond each."""

import pytest

from kit.hardware.parts import MeasuredOn
from kit.measure.stats import Interval
from kit.publish.compare import Verdict, verdict

C600 = MeasuredOn("ipu", "Graphcore C600", part="c600")
REPRODUCED, DIFFERS = Verdict.REPRODUCED, Verdict.DIFFERS


def judged(metric, published, measured, interval=None):
    return verdict(metric, published, measured, "c600", C600, interval=interval)[0]


@pytest.mark.parametrize(
    "measured, expected",
    [
        (110.0, REPRODUCED),
        (90.0, REPRODUCED),
        (110.001, DIFFERS),
        (89.999, DIFFERS),
        (100.0, REPRODUCED),
    ],
)
def test_a_figure_without_interval_at_ten_percent(measured, expected):
    assert judged("QPS", 100.0, measured) is expected


@pytest.mark.parametrize("metric", ["QPS", "Latency", "AVG Latency", "Energy efficiency"])
def test_the_ten_percent_rule_is_the_same_for_every_timed_figure(metric):
    assert judged(metric, 20.0, 22.0) is REPRODUCED and judged(metric, 20.0, 22.001) is DIFFERS


@pytest.mark.parametrize(
    "low, high, expected",
    [
        # the interval above the published figure
        (110.0, 120.0, REPRODUCED),
        (110.001, 120.0, DIFFERS),
        (80.0, 90.0, REPRODUCED),
        (80.0, 89.999, DIFFERS),  # below it
        (95.0, 105.0, REPRODUCED),  # holding it
    ],
)
def test_the_interval_at_ten_percent(low, high, expected):
    iv = Interval((low + high) / 2, low, high, method="m", rounds=5)
    assert judged("QPS", 100.0, iv.value, iv) is expected


def test_the_interval_not_the_figure_decides():
    # the figure 115 is 15 % off, its interval reaches 110: reproduced; without it: differs
    iv = Interval(115.0, 110.0, 120.0, method="m", rounds=5)
    assert judged("QPS", 100.0, 115.0, iv) is REPRODUCED and judged("QPS", 100.0, 115.0) is DIFFERS
    # the figure 105 is within 10 %, but its interval [111, 112] is not (a figure off its interval)
    assert judged("QPS", 100.0, 105.0, Interval(105.0, 111.0, 112.0)) is DIFFERS


@pytest.mark.parametrize(
    "measured, expected",
    [(0.55, REPRODUCED), (0.5500001, DIFFERS), (0.1, REPRODUCED), (0.6, DIFFERS)],
)
def test_a_numeric_diff_at_one_point_one_times_published(measured, expected):
    assert judged("Mean Diff", 0.5, measured) is expected


def test_a_diff_ignores_the_interval():
    assert judged("Mean Diff", 0.5, 0.6, Interval(0.6, 0.1, 0.7)) is DIFFERS


@pytest.mark.parametrize("metric", ["Top-1", "F1 Score", "Exact Match"])
@pytest.mark.parametrize(
    "measured, expected", [(99.0, REPRODUCED), (98.999, DIFFERS), (120.0, REPRODUCED)]
)
def test_an_accuracy_at_ninety_nine_percent(metric, measured, expected):
    assert judged(metric, 100.0, measured) is expected


def test_the_reason_states_the_rule_and_the_ratio():
    v, reason, ratio = verdict(
        "QPS", 100.0, 110.0, "c600", C600, interval=Interval(110.0, 108.0, 112.0)
    )
    assert v is REPRODUCED and ratio == pytest.approx(1.1)
    assert reason == "published 100 within 10% of the measured 95 % interval [108, 112]"
    v, reason, _ = verdict("QPS", 100.0, 89.0, "c600", C600)
    assert v is DIFFERS and reason == "within 10% of published (no interval: not recorded)"
    _, reason, _ = verdict("Mean Diff", 0.5, 0.55, "c600", C600)
    assert reason == "diff <= published x 1.1"
    _, reason, _ = verdict("Top-1", 100.0, 99.0, "c600", C600)
    assert reason == "accuracy >= 99% of published"


def test_differences_make_the_published_part_not_comparable_with_the_ratio():
    v, reason, ratio = verdict(
        "QPS",
        100.0,
        100.0,
        "c600",
        C600,
        differences=["batch 8, published at batch 32"],
        interval=Interval(100.0, 90.0, 110.0),
    )
    assert v is Verdict.NOT_COMPARABLE and ratio == 1.0
    assert reason == "batch 8, published at batch 32; ratio 1x (95 % CI 0.9-1.1x)"


def test_a_missing_or_nan_figure_is_not_measured():
    assert verdict("QPS", 100.0, float("nan"), "c600", C600)[0] is Verdict.NOT_MEASURED
    assert verdict("QPS", 100.0, None, "c600", C600, "why")[:2] == (Verdict.NOT_MEASURED, "why")
    assert verdict("QPS", 100.0, None, "c600", C600)[1] == "no result"


def test_the_reason_names_what_is_unknown():
    """No published figure to divide by, no hardware, no part: each said in words, never a crash."""
    v, reason, ratio = verdict("QPS", 0.0, 5.0, "c600", None)
    assert v is Verdict.NOT_COMPARABLE and ratio is None
    assert reason == "measured on unknown hardware, published on c600; ratio n/a"
    cpu = MeasuredOn("cpu", "AMD EPYC 9B14")
    assert (
        verdict("QPS", 10.0, 5.0, None, cpu)[1]
        == f"measured on {cpu.label}, published on unknown; ratio 0.5x"
    )
    _, reason, _ = verdict(
        "QPS", 10.0, 5.0, "c600", C600, differences=["1 client, published with 4", "PopRT 1.3.0"]
    )
    assert reason == "1 client, published with 4; PopRT 1.3.0; ratio 0.5x"


def test_a_figure_whose_interval_is_missing_says_why():
    one_round = Interval(100.0, reason="1 round(s): an interval needs at least 2")
    _, reason, _ = verdict("QPS", 100.0, 100.0, "c600", C600, interval=one_round)
    assert (
        reason == "within 10% of published (no interval: 1 round(s): an interval needs at least 2)"
    )
