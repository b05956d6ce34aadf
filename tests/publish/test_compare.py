import pytest

from kit.hardware.parts import MeasuredOn
from kit.publish.compare import Verdict, tolerance_statement, verdict

C600 = MeasuredOn("ipu", "Graphcore C600", part="c600")
EPYC = MeasuredOn("cpu", "AMD EPYC")


def test_other_hardware_is_not_comparable_and_shows_ratio():
    v, reason, ratio = verdict("QPS", 13499, 135.0, "c600", EPYC)
    assert v is Verdict.NOT_COMPARABLE
    assert ratio == pytest.approx(0.01, rel=1e-3)
    assert "cpu" in reason and "0.01x" in reason


def test_same_part_within_ten_percent_is_reproduced():
    assert verdict("QPS", 1000, 950, "c600", C600)[0] is Verdict.REPRODUCED
    assert verdict("QPS", 1000, 850, "c600", C600)[0] is Verdict.DIFFERS
    assert verdict("Latency", 1.36, 1.50, "c600", C600)[0] is Verdict.DIFFERS


def test_a_figure_without_its_published_value_is_not_comparable():
    """mypy (make test) found the tolerance checks fed None: a TypeError on the published part."""
    v, reason, ratio = verdict("QPS", None, 950, "c600", C600)
    assert (v, ratio) == (Verdict.NOT_COMPARABLE, None) and "no published figure" in reason


def test_accuracy_rule_is_ninety_nine_percent():
    assert verdict("Top-1", 0.76963, 0.7620, "c600", C600)[0] is Verdict.REPRODUCED
    assert verdict("Top-1", 0.76963, 0.7600, "c600", C600)[0] is Verdict.DIFFERS
    assert verdict("F1 Score", 85.0, 90.0, "c600", C600)[0] is Verdict.REPRODUCED


def test_diff_rule_lower_is_better():
    assert verdict("Mean Diff", 0.00161, 0.0010, "c600", C600)[0] is Verdict.REPRODUCED
    assert verdict("Mean Diff", 0.00161, 0.0020, "c600", C600)[0] is Verdict.DIFFERS


def test_missing_measurement_says_why():
    v, reason, ratio = verdict("Top-1", 0.77, None, "c600", EPYC, "random weights")
    assert v is Verdict.NOT_MEASURED and reason == "random weights" and ratio is None


def test_emulated_ipu_is_not_an_ipu():
    emulated = MeasuredOn("ipu", "Graphcore C600", part="c600", emulated=True)
    v, reason, _ = verdict("QPS", 100, 100, "c600", emulated)
    assert v is Verdict.NOT_COMPARABLE and "not run on an IPU" in reason


def test_a_mk2_ipu_never_reproduces_the_c2_card():
    """Bug (issue 11/12): matching by class let a C600 run 'reproduce' the Mk1 C2 card."""
    assert verdict("Latency", 1.36, 1.36, "gc2", C600)[0] is Verdict.NOT_COMPARABLE
    m2000 = MeasuredOn("ipu", "GC200", part="m2000")
    assert verdict("QPS", 100, 100, "c600", m2000)[0] is Verdict.NOT_COMPARABLE


def test_statement_names_tolerances():
    assert "10%" in tolerance_statement() and "99%" in tolerance_statement()


def test_interval_decides_reproduced_and_differs():
    from kit.measure.stats import Interval

    # point 800 is 20 % off, the interval reaches 920
    wide = Interval(800.0, 700.0, 920.0, method="m", rounds=5)
    v, reason, _ = verdict("QPS", 1000, 800, "c600", C600, interval=wide)
    assert v is Verdict.REPRODUCED and "[700, 920]" in reason
    narrow = Interval(800.0, 790.0, 810.0, method="m", rounds=5)
    v, reason, _ = verdict("QPS", 1000, 800, "c600", C600, interval=narrow)
    assert v is Verdict.DIFFERS and "outside" in reason and "[790, 810]" in reason
    # a point inside tolerance but an interval that cannot reach it: still reproduced (overlap)
    assert (
        verdict("QPS", 1000, 950, "c600", C600, interval=Interval(950.0, 940.0, 960.0))[0]
        is Verdict.REPRODUCED
    )


def test_noise_and_interval_are_stated_in_every_verdict():
    from kit.measure.stats import Interval

    v, reason, _ = verdict(
        "QPS",
        1000,
        10,
        "c600",
        EPYC,
        interval=Interval(10.0, 9.0, 11.0),
        noisy="noisy: CPU steal 9% > 5%",
    )
    assert (
        v is Verdict.NOT_COMPARABLE
        and "0.009-0.011x" in reason
        and reason.endswith("CPU steal 9% > 5%")
    )
    v, reason, _ = verdict("QPS", 1000, 950, "c600", C600)
    assert v is Verdict.REPRODUCED and "no interval" in reason


def test_a_scorecard_row_reads_back_from_its_record_and_from_json():
    import json

    import pandas as pd

    from kit.publish.compare import Comparison, ReasonCode, Verdict

    row = Comparison(
        study="bytemlperf_c600",
        figure="QPS",
        model="m",
        precision="FP16",
        batch_size="32",
        unit="samples/s",
        published=100.0,
        published_hardware="C600",
        measured=None,
        measured_hardware="",
        verdict=Verdict.NOT_MEASURED,
        reason="batch 32 not run (measured: 1)",
        reason_code=ReasonCode.BATCH_NOT_RUN,
        differences=("a",),
        difference_codes=("batch",),
    )
    record = pd.DataFrame([row.to_dict()]).to_dict("records")[0]  # NaN for the missing numbers
    assert (
        Comparison.from_dict(record)
        == row
        == Comparison.from_dict(json.loads(json.dumps(row.to_dict())))
    )
    older = Comparison.from_dict(
        {"study": "c2_qwant", "verdict": "failed", "reason": "timed out", "measured": None}
    )
    assert older.verdict == Verdict.FAILED and older.reason_code == "" and older.emulated is False
    assert Comparison.of(row) is row
