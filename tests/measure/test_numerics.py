"""NumericDiff follows ByteMLPerf's draw_all_diff: NaN/Inf values become 0 before subtracting,
a zero reference divides by 1, figures round to 5 decimals; the counts keep what was hidden."""

import numpy as np
import pytest

from kit.errors import InvalidParameter, KitError
from kit.measure.numerics import NumericDiff


def test_nan_output_is_a_difference_not_a_match():
    d = NumericDiff.between([np.array([1.0, 2.0, 3.0])], [np.array([np.nan, 2.0, np.inf])])
    # the NaN becomes 0 -> |1 - 0| = 1; the Inf becomes 0 -> |3 - 0| = 3
    assert d.max_abs == pytest.approx(3.0) and d.mean_abs == pytest.approx(4 / 3)
    assert d.nan_count == 1 and d.inf_count == 1 and d.elements == 3
    assert d.max_rel == pytest.approx(1.0)  # 1/1 and 3/3


def test_nan_in_both_counts_twice_and_matches():
    d = NumericDiff.between([np.array([np.nan, -np.inf])], [np.array([np.nan, np.inf])])
    assert d.mean_abs == 0.0 and d.nan_count == 2 and d.inf_count == 2


def test_zero_reference_divides_by_one():
    d = NumericDiff.between([np.array([0.0, 2.0])], [np.array([0.5, 1.0])])
    assert d.max_rel == pytest.approx(0.5) and d.mean_rel == pytest.approx(0.5)


def test_several_outputs_are_flattened_together_and_rounded_as_bytemlperf():
    d = NumericDiff.between(
        [np.zeros((2, 2)), np.ones(3)], [np.full((2, 2), 1e-6), np.ones(3) * 1.123456]
    )
    assert d.elements == 7
    figures = d.bytemlperf()
    assert figures["Max Diff"] == 0.12346 and set(figures) == {
        "Mean Diff",
        "Std Diff",
        "Max Diff",
        "Max Rel-Diff",
        "Mean Rel-Diff",
    }


@pytest.mark.parametrize(
    "ref, got",
    [
        ([np.zeros(3)], [np.zeros(3), np.zeros(3)]),
        ([np.zeros(3)], [np.zeros(4)]),
        ([], []),
    ],
)
def test_mismatched_outputs_are_a_kit_error(ref, got):
    with pytest.raises(InvalidParameter) as err:
        NumericDiff.between(ref, got)
    assert isinstance(err.value, KitError) and "reference" in str(err.value)
