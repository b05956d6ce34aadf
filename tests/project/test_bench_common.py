"""benchmarks/common.py: the one rule every benchmark's verdict on a ratio's target follows."""

from __future__ import annotations

import math

import pytest

from benchmarks.common import TargetVerdict, ratio_verdict, target_verdict


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (0.95, 1.1, TargetVerdict.MET),  # the low end at the target is enough
        (0.8, 0.94, TargetVerdict.MISSED),
        (0.8, 0.95, TargetVerdict.INCONCLUSIVE),  # the high end at the target is not a miss
        (0.9, 1.1, TargetVerdict.INCONCLUSIVE),
        (None, None, TargetVerdict.INCONCLUSIVE),  # no interval
        (math.nan, math.nan, TargetVerdict.INCONCLUSIVE),
    ],
)
def test_a_target_is_met_or_missed_only_by_the_whole_interval(low, high, verdict):
    assert target_verdict(low, high, 0.95) is verdict


def test_the_paired_rounds_ratio_follows_the_same_rule():
    iv, verdict = ratio_verdict([10.0, 10.2, 9.9, 10.1], [10.0, 10.0, 10.0, 10.0], 0.95)
    assert iv.low >= 0.95 and verdict is TargetVerdict.MET
    _, verdict = ratio_verdict([10.0], [10.0], 0.95)
    assert verdict.startswith("inconclusive (")
