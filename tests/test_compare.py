import pytest

from kit.compare import tolerance_statement, verdict


def test_other_hardware_is_not_comparable_and_shows_ratio():
    v, reason, ratio = verdict("QPS", 13499, 135.0, "ipu", "cpu")
    assert v == "not comparable"
    assert ratio == pytest.approx(0.01, rel=1e-3)
    assert "cpu" in reason and "0.01x" in reason


def test_same_hardware_within_ten_percent_is_reproduced():
    assert verdict("QPS", 1000, 950, "ipu", "ipu")[0] == "reproduced"
    assert verdict("QPS", 1000, 850, "ipu", "ipu")[0] == "differs"
    assert verdict("Latency", 1.36, 1.50, "ipu", "ipu")[0] == "differs"


def test_accuracy_rule_is_ninety_nine_percent():
    assert verdict("Top-1", 0.76963, 0.7620, "ipu", "ipu")[0] == "reproduced"
    assert verdict("Top-1", 0.76963, 0.7600, "ipu", "ipu")[0] == "differs"
    assert verdict("F1 Score", 85.0, 90.0, "ipu", "ipu")[0] == "reproduced"


def test_diff_rule_lower_is_better():
    assert verdict("Mean Diff", 0.00161, 0.0010, "ipu", "ipu")[0] == "reproduced"
    assert verdict("Mean Diff", 0.00161, 0.0020, "ipu", "ipu")[0] == "differs"


def test_missing_measurement_says_why():
    v, _, ratio = verdict("Top-1", 0.77, None, "ipu", "cpu", "random weights")
    assert v == "not measured: random weights" and ratio is None


def test_emulated_ipu_is_not_an_ipu():
    assert verdict("QPS", 100, 100, "ipu", "ipu (emulated: PopRT test double)")[0] == "not comparable"


def test_statement_names_tolerances():
    assert "10%" in tolerance_statement() and "99%" in tolerance_statement()
