"""Known answers for what users read (issue 33): a scorecard built from a hand-made run on a real
C600 at the two published batch sizes of resnet50 FP16, checked row by row (measured value, batch,
part, interval, ratio, verdict), and the C2 rows from a constant-power sensor. Every expected
figure is worked out here from the call times, never read from the code's output."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from scipy.stats import t as student_t

from kit.measure.intervals import figure_interval
from kit.measure.window import BatchMeasurement
from kit.publish.compare import Reason, ReasonCode, Verdict
from kit.publish.scorecard import MeasuredFigure, PublishedFigure, _row, bytemlperf_rows, c2_rows
from kit.published import figures as published
from kit.results import Measurement, ResultKind, RunResult, Tables
from kit.results.session import Session
from kit.studies.c2 import c2_row
from tests.c600_runs import c600_result, calls_of

# published: 4 clients; batch 4 and 32 (the headline's)
MODEL, PRECISION = "resnet50-torch-fp32", "FP16"
T1 = student_t.ppf(0.975, 1)  # two rounds: a t quantile with one degree of freedom (12.706)

# Batch 32, each of the 4 clients: 20 slow calls of 20 ms (ByteMLPerf drops them), 60 kept calls,
# 20 slow calls. Round 1 = calls 0-49 (20 x 20 + 30 x 11.0 ms = 730 ms), round 2 = calls 50-99
# (20 x 11.5 + 8 x 12.5 + 2 x 14.0 + 20 x 20 = 758 ms).
KEPT_1 = [11.0] * 30
KEPT_2 = [11.5] * 20 + [12.5] * 8 + [14.0] * 2
B32_THREAD = [20.0] * 20 + KEPT_1 + KEPT_2 + [20.0] * 20
# Batch 4: 30 calls of 3 ms per client (40 or fewer: ByteMLPerf keeps all), identical blocks.
B4_THREAD = [3.0] * 30


def two_round_half_width(a: list[float], b: list[float]) -> tuple[float, float]:
    """(ratio, half-width) of the ratio estimator over two rounds, written out."""
    r = (a[0] + a[1]) / (b[0] + b[1])
    d = [a[0] - r * b[0], a[1] - r * b[1]]
    se = math.sqrt((d[0] ** 2 + d[1] ** 2) / (2 - 1) / 2) / ((b[0] + b[1]) / 2)
    return r, T1 * se


def c600_run(created_at: str = "2026-11-20T10:00:00+00:00", b32=B32_THREAD) -> RunResult:
    b32 = BatchMeasurement(
        batch_size=32, mode="clients", threads=4, calls=[calls_of(b32)] * 4, rounds=[[50] * 4]
    )
    b4 = BatchMeasurement(batch_size=4, mode="clients", threads=4, calls=[calls_of(B4_THREAD)] * 4)
    result = c600_result(MODEL, PRECISION, [b4, b32])
    result.accuracy = [{"metric": "Top-1", "value": 0.7620, "status": "measured"}]
    result.created_at = created_at
    return result


@pytest.fixture  # per test, not per module: mutmut then runs every test whose rows reach a mutant
def rows():
    older = c600_run("2026-11-19T10:00:00+00:00", b32=[5.0] * 100)  # an older run: never chosen
    card = bytemlperf_rows([(Path("new.json"), c600_run()), (Path("old.json"), older)])
    return {
        (r.study, r.figure, r.batch_size): r
        for r in card
        if r.model == MODEL and r.precision == PRECISION
    }


# --- batch 32: the headline's batch --------------------------------------------------------------

QPS_32 = 240 * 32 / 0.688  # 4 x 60 kept calls of 32 samples over the kept window (688 ms)
# the QPS interval: the relative one of the throughput over rounds of every call (4 x 50 calls a
# round)
_R, _HALF = two_round_half_width([4 * 50 / 0.730 * 0.730, 4 * 50 / 0.758 * 0.758], [0.730, 0.758])
QPS_REL = _HALF / _R


def test_the_headline_qps_is_the_latest_runs_at_the_published_batch(rows):
    r = rows[("bytemlperf_c600", "QPS", "32")]
    assert r.measured == pytest.approx(QPS_32, rel=1e-9) and r.run == "new.json"
    assert r.published == 13499.0 and r.ratio == pytest.approx(QPS_32 / 13499, rel=1e-9)
    assert r.measured_low == pytest.approx(QPS_32 * (1 - QPS_REL), rel=1e-9)
    assert r.measured_high == pytest.approx(QPS_32 * (1 + QPS_REL), rel=1e-9)
    # 11,163 is 17 % under 13,499, but its interval reaches 13,831: reproduced through the interval
    assert QPS_32 * (1 + QPS_REL) > 13499 > QPS_32 * 1.1
    assert r.verdict == Verdict.REPRODUCED and "of the measured 95 % interval" in r.reason
    assert "C600" in r.published_hardware and r.measured_hardware.startswith("Graphcore C600 (ipu")


def test_per_batch_qps_at_32(rows):
    r = rows[("bytemlperf_reports", "QPS", "32")]
    assert r.measured == pytest.approx(QPS_32, rel=1e-9) and r.published == 13542.0
    assert r.measured_low == pytest.approx(QPS_32 * (1 - QPS_REL), rel=1e-9)
    # every call, beside
    assert r.measured_all_calls == pytest.approx(4 * 100 * 32 / 1.488, rel=1e-9)
    assert r.verdict == Verdict.REPRODUCED


def test_per_batch_avg_latency_at_32_is_the_mean_of_the_kept_calls(rows):
    r = rows[("bytemlperf_reports", "AVG Latency", "32")]
    mean, half = two_round_half_width([4 * sum(KEPT_1), 4 * sum(KEPT_2)], [120, 120])
    assert r.measured == pytest.approx(688 / 60) and mean == pytest.approx(688 / 60)
    assert (r.measured_low, r.measured_high) == (
        pytest.approx(mean - half),
        pytest.approx(mean + half),
    )
    assert r.measured_all_calls == pytest.approx((688 + 40 * 20) / 100)  # the slow ends count there
    assert r.published == 9.33 and r.ratio == pytest.approx(688 / 60 / 9.33)
    # 11.47 is 23 % over 9.33; the interval [5.5, 17.4] holds it
    assert r.verdict == Verdict.REPRODUCED


def test_per_batch_p99_at_32_is_bytemlperfs_sorted_call(rows):
    """Kept, sorted: 120 x 11.0, 80 x 11.5, 32 x 12.5, 8 x 14.0; P99 = sorted[int(0.99 x 240)] =
    sorted[237]. Interval (Woodruff): every call is at or below 14.0 in both rounds, so the share's
    error is the binomial floor sqrt(0.99 x 0.01 / 240); spread = t x that = 0.0816; low =
    sorted[floor((0.99 - 0.0816) x 240) - 1] = sorted[217] = 12.5; high = sorted[min(ceil(1.0716 x
    240), 239)] = 14.0."""
    r = rows[("bytemlperf_reports", "P99 Latency", "32")]
    spread = T1 * math.sqrt(0.99 * 0.01 / 240)
    assert math.floor((0.99 - spread) * 240) - 1 == 217
    assert r.measured == 14.0 and (r.measured_low, r.measured_high) == (12.5, 14.0)
    assert r.measured_all_calls == 20.0  # numpy's p99 over every call, the slow ends included
    assert r.published == 10.96 and r.ratio == pytest.approx(14.0 / 10.96)
    assert r.verdict == Verdict.DIFFERS  # the interval's low end 12.5 is 14 % over 10.96
    assert "outside 10% of the measured 95 % interval [12.5, 14]" in r.reason


# --- batch 4 -------------------------------------------------------------------------------------


def test_per_batch_figures_at_4_differ(rows):
    qps = 4 * 30 * 4 / 0.090  # 120 calls of 4 samples in 90 ms: 5,333
    r = rows[("bytemlperf_reports", "QPS", "4")]
    assert (
        r.measured == pytest.approx(qps)
        and r.published == 7062.0
        and r.ratio == pytest.approx(qps / 7062)
    )
    # identical blocks
    assert r.measured_low == pytest.approx(qps) and r.measured_high == pytest.approx(qps)
    assert r.verdict == Verdict.DIFFERS
    avg, p99 = (
        rows[("bytemlperf_reports", "AVG Latency", "4")],
        rows[("bytemlperf_reports", "P99 Latency", "4")],
    )
    assert avg.measured == pytest.approx(3.0) and avg.ratio == pytest.approx(3.0 / 2.24)
    assert p99.measured == 3.0 and p99.ratio == pytest.approx(3.0 / 2.53)
    assert avg.verdict == p99.verdict == Verdict.DIFFERS


def test_the_accuracy_row_is_judged_at_99_percent(rows):
    r = rows[("bytemlperf_c600", "Top-1", "")]
    assert (
        r.measured == 0.7620
        and r.published == 0.76963
        and r.ratio == pytest.approx(0.7620 / 0.76963)
    )
    assert r.verdict == Verdict.REPRODUCED and r.measured_low is None  # accuracy has no interval


def test_every_published_row_of_the_model_is_there(rows):
    assert set(rows) == {
        ("bytemlperf_c600", "QPS", "32"),
        ("bytemlperf_c600", "Top-1", ""),
        *{
            ("bytemlperf_reports", f, b)
            for f in ("QPS", "AVG Latency", "P99 Latency")
            for b in ("4", "32")
        },
    }


def test_the_same_run_through_the_poprt_double_is_not_comparable():
    result = c600_run()
    session = Session.from_dict({**result.backend.session.to_dict(), "emulated": True})
    result.backend = replace(result.backend, session=session)
    card = [
        r
        for r in bytemlperf_rows([(Path("r.json"), result)])
        if r.model == MODEL and r.precision == PRECISION
    ]
    assert {r.verdict for r in card if r.figure != "Top-1"} == {Verdict.NOT_COMPARABLE}
    headline = next(r for r in card if r.study == "bytemlperf_c600" and r.figure == "QPS")
    assert "not run on an IPU" in headline.reason and headline.ratio == pytest.approx(
        QPS_32 / 13499, rel=1e-9
    )


# --- the C2 rows ---------------------------------------------------------------------------------


def c2_measurement(micro: int, call_ms: float, watts: float | None) -> BatchMeasurement:
    """Two replicas, 10 back-to-back calls of `call_ms` each; a constant-power sensor."""
    m = BatchMeasurement(
        batch_size=micro, mode="replicas", threads=2, calls=[calls_of([call_ms] * 10)] * 2
    )
    if watts is None:
        m.power = {"method": "unavailable", "reason": "no sensor"}
    else:
        m.power = {
            "method": "measured",
            "mean_w": watts,
            "mean_w_samples": 2 * watts,
            "sensor": "const",
            "sampler": "test",
            "window_resolved": True,
        }
    return m


def test_c2_row_from_a_constant_power_sensor():
    """Batch 4 on two replicas (micro batch 2), calls of 2.5 ms, 150 W: latency 2.5 ms per batch,
    throughput 4 / 0.0025 = 1,600 images/s, efficiency 1,600 / 150 = 10.667 images/s/W."""
    row = c2_row(4, 2, c2_measurement(2, 2.5, 150.0))
    assert row["power_sensor"] == "const"
    assert (
        row["latency_ms"] == pytest.approx(2.5)
        and row["batch_size"] == 4
        and row["micro_batch"] == 2
    )
    assert row["throughput"] == pytest.approx(1600.0)
    assert row["efficiency"] == pytest.approx(1600.0 / 150.0) and row["power_w"] == 150.0
    # the same here: back to back
    assert row["throughput_wall"] == pytest.approx(2 * 10 * 2 / 0.025)
    assert row["latency_p99_ms"] == pytest.approx(2.5) and row["efficiency_indicative"] == ""


def test_c2_efficiency_uses_the_time_weighted_power_not_the_sample_mean():
    row = c2_row(4, 2, c2_measurement(2, 2.5, 200.0))  # mean_w_samples is 400 W here
    assert row["efficiency"] == pytest.approx(8.0)


def test_c2_latency_is_the_mean_call_not_the_wall_rate():
    """Calls of 1 ms and 3 ms alternating, the replicas 1 ms apart: latency = mean call = 2 ms,
    throughput = batch / latency = 4 / 0.002 = 2,000, not the wall rate (40 calls x 2 / 21 ms)."""
    durations = [1.0, 3.0] * 5
    m = BatchMeasurement(
        batch_size=2,
        mode="replicas",
        threads=2,
        calls=[calls_of(durations), calls_of(durations, 1_000_000)],
    )
    m.power = {"method": "measured", "mean_w": 100.0, "sensor": "const", "sampler": "test"}
    row = c2_row(4, 2, m)
    assert row["latency_ms"] == pytest.approx(2.0) and row["throughput"] == pytest.approx(2000.0)
    assert row["throughput_wall"] == pytest.approx(20 * 2 / 0.021)
    assert row["efficiency"] == pytest.approx(20.0)


def test_c2_without_power_says_why():
    row = c2_row(4, 2, c2_measurement(2, 2.5, None))
    assert row["efficiency"] is None and row["efficiency_reason"] == "power unavailable: no sensor"
    m = c2_measurement(2, 2.5, None)
    # a watt figure, not measured
    m.power = {"method": "unavailable", "mean_w": 150.0, "reason": "stale reading"}
    assert c2_row(4, 2, m)["efficiency"] is None
    m.power = {"method": "measured", "mean_w": 0.0}
    assert c2_row(4, 2, m)["efficiency"] is None and "power_w" not in c2_row(4, 2, m)
    m.power = None
    assert c2_row(4, 2, m)["efficiency_reason"] == "power unavailable: not sampled"


def c2_result(batches: dict[int, tuple[float, float]]) -> RunResult:
    """A C2 study on a Mk1 C2 card: {card batch: (call ms, watts)}, two replicas."""
    result = RunResult(ResultKind.C2_STUDY, "c2", parameters={}, environment={})
    result.backend = {
        "name": "ipu",
        "precision": "fp16",
        "device": "ipu",
        "device_info": {"kind": "ipu", "name": "Graphcore C2", "part": "gc2"},
        "session": {"emulated": False},
    }
    ms = {b: c2_measurement(b // 2, call, w) for b, (call, w) in batches.items()}
    result.measurements = [m.to_dict() for m in ms.values()]
    result.tables = result.tables.with_table("c2", [c2_row(b, b // 2, m) for b, m in ms.items()])
    return result


def test_c2_scorecard_rows_judge_the_card_batch():
    """Published batch 2: 1.36 ms, 1,474.16 images/s, 6.51 images/s/W. Measured: calls of 1.36 ms
    at micro batch 1 on two replicas (card batch 2), 226.4 W: 2 / 0.00136 = 1,470.59 images/s,
    1,470.59 / 226.4 = 6.4955 images/s/W. Every call the same: zero-width intervals."""
    card = c2_rows([(Path("c2.json"), c2_result({2: (1.36, 226.4), 4: (3.0, 150.0)}))])
    by = {(r.figure, r.batch_size): r for r in card}
    lat, thr, eff = by[("Latency", "2")], by[("Throughput", "2")], by[("Energy efficiency", "2")]
    assert lat.measured == pytest.approx(1.36) and lat.published == 1.36
    assert (lat.measured_low, lat.measured_high) == (pytest.approx(1.36), pytest.approx(1.36))
    assert thr.measured == pytest.approx(2 / 0.00136) and thr.published == 1474.16
    assert thr.measured_low == pytest.approx(2 / 0.00136)  # the card batch, not the micro batch
    assert eff.measured == pytest.approx(2 / 0.00136 / 226.4) and eff.published == 6.51
    assert eff.measured_high == pytest.approx(2 / 0.00136 / 226.4)
    assert {lat.verdict, thr.verdict, eff.verdict} == {Verdict.REPRODUCED}
    # batch 4: 3.0 ms vs 1.94 published: latency and throughput differ; 150 W: 1,333 / 150 = 8.89 vs
    # 7.80
    assert by[("Latency", "4")].verdict == by[("Throughput", "4")].verdict == Verdict.DIFFERS
    assert by[("Energy efficiency", "4")].measured == pytest.approx(4 / 0.003 / 150)
    assert by[("Energy efficiency", "4")].verdict == Verdict.DIFFERS
    assert by[("Latency", "6")].verdict == Verdict.NOT_MEASURED
    assert published.c2_tables().loc[4, "Energy efficiency"] == 7.80


def test_c2_intervals_from_blocks_of_unequal_calls():
    """Batch 4 (micro batch 2 on two replicas), each replica's 10 calls: 3 of 2.0 ms, 3 of 2.5 ms, 4
    of 3.0 ms. No rounds: cut into 3 blocks of 3, 3 and 4 calls per replica. Latency = 51 / 20 =
    2.55 ms; its interval: the ratio of block sums 12, 15, 24 ms to block calls 6, 6, 8, with
    t(0.975, 2). Throughput = 4 / latency (its interval through 1/x); efficiency = throughput / 120
    W, its interval the throughput's relative one."""
    durations = [2.0] * 3 + [2.5] * 3 + [3.0] * 4
    m = BatchMeasurement(batch_size=2, mode="replicas", threads=2, calls=[calls_of(durations)] * 2)
    m.power = {
        "method": "measured",
        "mean_w": 120.0,
        "sensor": "const",
        "sampler": "test",
        "window_resolved": True,
    }
    result = RunResult(ResultKind.C2_STUDY, "c2", parameters={}, environment={})
    result.backend = {
        "name": "ipu",
        "precision": "fp16",
        "device": "ipu",
        "session": {"emulated": False},
        "device_info": {"kind": "ipu", "name": "Graphcore C2", "part": "gc2"},
    }
    result.measurements = [m.to_dict()]
    result.tables = result.tables.with_table("c2", [c2_row(4, 2, m)])
    by = {r.figure: r for r in c2_rows([(Path("c2.json"), result)]) if r.batch_size == "4"}
    r = 51 / 20
    d = [12 - r * 6, 15 - r * 6, 24 - r * 8]
    half = student_t.ppf(0.975, 2) * math.sqrt(sum(x * x for x in d) / 2 / 3) / (20 / 3)
    lat, thr, eff = by["Latency"], by["Throughput"], by["Energy efficiency"]
    assert lat.measured == pytest.approx(2.55) and lat.measured_low == pytest.approx(r - half)
    assert lat.measured_high == pytest.approx(r + half)
    assert thr.measured == pytest.approx(4000 / 2.55)
    assert (thr.measured_low, thr.measured_high) == (
        pytest.approx(4000 / (r + half)),
        pytest.approx(4000 / (r - half)),
    )
    rel = (4000 / (r - half) - 4000 / (r + half)) / 2 / (4000 / 2.55)
    assert eff.measured == pytest.approx(4000 / 2.55 / 120)
    assert eff.measured_low == pytest.approx(4000 / 2.55 / 120 * (1 - rel))
    assert eff.measured_high == pytest.approx(4000 / 2.55 / 120 * (1 + rel))
    iv, note = figure_interval(result, "Energy efficiency", 4, eff.measured)
    assert iv.rounds == 3 and note == ""
    assert (
        iv.method
        == "the throughput's relative interval (the power reading's own variation is not included)"
    )
    # no efficiency: no interval
    assert figure_interval(result, "Energy efficiency", 4, None) == (None, "")
    assert figure_interval(result, "Energy efficiency", 2, 1.0) == (None, "")  # no such batch
    # published batch 4: 1.94 ms, 2,063.03 images/s, 7.80 images/s/W
    # 2.55 is 31 % over 1.94, but the interval [1.26, 3.84] holds it
    assert lat.verdict == Verdict.REPRODUCED
    assert eff.verdict == Verdict.REPRODUCED and thr.verdict == Verdict.REPRODUCED


def test_summary_counts_name_every_verdict_with_zeros():
    import pandas as pd

    from kit.publish.scorecard import summary_counts

    card = pd.DataFrame({"verdict": [Verdict.REPRODUCED, Verdict.REPRODUCED, Verdict.DIFFERS]})
    assert summary_counts(card) == {
        "reproduced": 2,
        "differs": 1,
        "not comparable": 0,
        "not measured": 0,
        "failed": 0,
    }


def test_c2_rows_carry_their_labels_and_the_reason_for_a_missing_figure():
    from kit.publish.scorecard import NOT_SELECTED, RunOutcome

    result = c2_result({2: (1.36, 226.4)})
    (row, *rest) = result.tables.c2
    no_power = replace(row, efficiency=None, efficiency_reason="power unavailable: no sensor")
    result.tables = result.tables.with_table("c2", [no_power, *rest])
    card = c2_rows([(Path("c2.json"), result)])
    assert len(card) == 18  # 6 published batch sizes x 3 figures
    lat = next(r for r in card if r.figure == "Latency" and r.batch_size == "2")
    assert (lat.study, lat.model, lat.precision, lat.unit, lat.source, lat.run) == (
        "c2_qwant",
        "resnext101-c2",
        "FP16 (mixed)",
        "ms/batch",
        "seed 003 tables 1-3",
        "c2.json",
    )
    assert "Graphcore C2" in lat.published_hardware and lat.measured_hardware.startswith(
        "Graphcore C2 (ipu"
    )
    thr = next(r for r in card if r.figure == "Throughput")
    assert "throughput = batch / mean latency" in thr.source  # the paper's, not the wall rate
    units = {r.figure: r.unit for r in card}
    assert units == {
        "Latency": "ms/batch",
        "Throughput": "images/s",
        "Energy efficiency": "images/s/W",
    }
    eff = next(r for r in card if r.figure == "Energy efficiency" and r.batch_size == "2")
    assert eff.verdict == Verdict.NOT_MEASURED and eff.reason == "power unavailable: no sensor"
    missing = next(r for r in card if r.figure == "Latency" and r.batch_size == "4")
    assert (
        missing.verdict == Verdict.NOT_MEASURED
        and missing.reason == "no result"
        and missing.run == "c2.json"
    )
    no_table = c2_result({})
    no_table.tables = Tables()
    assert {r.verdict for r in c2_rows([(Path("c2.json"), no_table)])} == {Verdict.NOT_MEASURED}
    # no C2 result: not run, not selected, or what became of its job
    assert {r.reason for r in c2_rows([])} == {"C2 study not run"}
    assert {r.reason for r in c2_rows([], selected={"other"})} == {NOT_SELECTED.reason.text}
    assert {r.reason for r in c2_rows([], selected={"c2_study"})} == {"C2 study not run"}
    failed = RunOutcome(Verdict.FAILED, Reason("failed: boom", ReasonCode.FAILED))
    assert {(r.verdict, r.reason) for r in c2_rows([], failed, selected={"other"})} == {
        (Verdict.FAILED, "failed: boom")
    }


# --- what every row names, and which run it comes from --------------------------------------------

UNITS = {"QPS": "samples/s", "AVG Latency": "ms", "P99 Latency": "ms", "Top-1": "fraction (0-1)"}


def test_every_row_names_its_unit_source_and_run(rows):
    for (study, figure, _), r in rows.items():
        assert r.unit == UNITS[figure], (study, figure, r.unit)
        assert r.source == (
            "seed 001 README table" if study == "bytemlperf_c600" else "ByteMLPerf report JSON"
        )
        assert r.run == "new.json"
    older = bytemlperf_rows([(Path("o.json"), c600_run())], pub_study="bytemlperf_c600_older")
    assert {r.source for r in older} == {"seed 000 older table"}


def test_each_row_takes_its_own_models_and_precisions_run():
    """Three runs in one batch: resnet50 FP16, resnet50 FP8 and bert FP16, each with its own QPS."""
    from tests.c600_runs import measured

    runs = [
        (
            Path("fp16.json"),
            c600_result(MODEL, "FP16", [measured(32, 4, 12000.0), measured(4, 4, 6000.0)]),
        ),
        (
            Path("fp8.json"),
            c600_result(MODEL, "FP8", [measured(32, 4, 19000.0), measured(4, 4, 9000.0)]),
        ),
        (Path("bert.json"), c600_result("bert-torch-fp32", "FP16", [measured(40, 1, 3000.0)])),
    ]
    card = {
        (r.model, r.precision, r.study, r.figure, r.batch_size): r for r in bytemlperf_rows(runs)
    }
    assert card[(MODEL, "FP16", "bytemlperf_c600", "QPS", "32")].run == "fp16.json"
    assert card[(MODEL, "FP16", "bytemlperf_c600", "QPS", "32")].measured == pytest.approx(12000.0)
    assert card[(MODEL, "FP8", "bytemlperf_reports", "QPS", "4")].measured == pytest.approx(9000.0)
    assert card[(MODEL, "FP8", "bytemlperf_reports", "QPS", "4")].run == "fp8.json"
    assert card[
        ("bert-torch-fp32", "FP16", "bytemlperf_c600", "QPS", "40")
    ].measured == pytest.approx(3000.0)
    assert card[("albert-torch-fp32", "FP16", "bytemlperf_c600", "QPS", "40")].measured is None


def test_the_headline_is_the_published_batchs_even_where_another_batch_is_faster():
    from tests.c600_runs import measured

    run = c600_result(MODEL, PRECISION, [measured(4, 4, 15000.0), measured(32, 4, 12000.0)])
    head = next(
        r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL
        and r.precision == PRECISION
        and r.study == "bytemlperf_c600"
        and r.figure == "QPS"
    )
    assert head.measured == pytest.approx(12000.0) and head.measured_batch == "32"


def test_per_batch_rows_carry_the_runs_differences_from_the_published_setup():
    """One client where ByteMLPerf ran four: every per-batch figure is "not comparable", saying
    so."""
    from tests.c600_runs import measured

    run = c600_result(MODEL, PRECISION, [measured(4, 1, 7000.0), measured(32, 1, 13500.0)])
    card = [
        r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL and r.precision == PRECISION and r.study == "bytemlperf_reports"
    ]
    assert len(card) == 6 and {r.verdict for r in card} == {Verdict.NOT_COMPARABLE}
    assert all("client" in r.reason for r in card)


def _failed_batch_run(errors: list[str]) -> RunResult:
    """A run an older kit wrote: its failed batches in its errors only (the upgrade reads them)."""
    from tests.c600_runs import measured

    run = c600_result(MODEL, PRECISION, [measured(4, 4, 7000.0)])
    run.errors = errors
    return RunResult.from_dict({**run.to_dict(), "schema_version": 2})


def test_a_failed_batch_says_why_in_its_own_words():
    """The first error of that batch, everything after its 'batch N:' prefix (colons included)."""
    run = _failed_batch_run(
        ["batch 8: unrelated", "batch 32: out of memory: needs 9.1 GB", "batch 32: a second error"]
    )
    card = {
        (r.study, r.figure, r.batch_size): r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL and r.precision == PRECISION
    }
    r = card[("bytemlperf_reports", "QPS", "32")]
    assert r.measured is None and r.verdict == Verdict.NOT_MEASURED
    assert "batch 32 failed: out of memory: needs 9.1 GB" in r.reason
    head = card[("bytemlperf_c600", "QPS", "32")]
    assert head.measured is None and "batch 32 failed: out of memory: needs 9.1 GB" in head.reason
    not_run = {
        (r.study, r.figure, r.batch_size): r
        for r in bytemlperf_rows([(Path("r.json"), _failed_batch_run([]))])
        if r.model == MODEL and r.precision == PRECISION
    }
    assert (
        "batch 32 not run (measured: 4)"
        in not_run[("bytemlperf_reports", "AVG Latency", "32")].reason
    )


def test_latency_measured_before_the_trim_was_kept_says_so():
    run = c600_run()
    run.measurements = [
        Measurement.from_dict({k: v for k, v in m.to_dict().items() if k != "bytemlperf"})
        for m in run.measurements
    ]
    card = {
        (r.figure, r.batch_size): r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL and r.precision == PRECISION and r.study == "bytemlperf_reports"
    }
    for figure in ("AVG Latency", "P99 Latency"):
        assert card[(figure, "32")].measured is None
        assert (
            card[(figure, "32")].reason == "measured before ByteMLPerf's trimmed latency was kept"
        )
    assert card[("QPS", "32")].measured == pytest.approx(QPS_32, rel=1e-9)  # QPS is kept apart


def test_a_cpu_run_is_named_by_its_cpu_model():
    from kit.publish.scorecard import measured_hardware

    run = c600_run()
    run.backend = {
        "name": "openvino",
        "precision": "bf16",
        "device": "cpu",
        "device_info": {"kind": "cpu"},
    }
    run.environment = {"cpu": {"model": "AMD EPYC 9B14"}}
    assert measured_hardware(run) == "AMD EPYC 9B14 (cpu; openvino bf16)"
    run.environment = {}
    assert measured_hardware(run).startswith("? (cpu")


def test_an_accuracy_entry_without_a_status_says_so():
    from kit.publish.scorecard import metric_value

    run = c600_run()
    run.accuracy = [{"metric": "Top-1", "value": None}]
    assert metric_value(run, "Top-1") == (None, Reason("no status recorded", ReasonCode.OTHER))
    run.accuracy = [
        {
            "metric": "Top-1",
            "value": 0.5,
            "status": "not measured: no dataset under data/",
            "reason_code": "no_dataset",
        }
    ]
    assert metric_value(run, "Top-1") == (
        None,
        Reason("no dataset under data/", ReasonCode.NO_DATASET),
    )
    assert metric_value(None, "Top-1") == (None, Reason(""))


# --- which measurement an interval comes from -----------------------------------------------------


def _result_of(*measurements: BatchMeasurement) -> RunResult:
    result = RunResult.new(ResultKind.MODEL_BENCHMARK, MODEL, {}, {})
    result.measurements = [m.to_dict() for m in measurements]
    return result


def test_a_pack_runs_figures_stand_at_its_pack_batch():
    """Pack mode: calls of 8 packed rows stand for a pack batch of 20 samples (ByteMLPerf's
    batch)."""
    threads = [calls_of([2.0 + (i % 3) for i in range(60)])]
    m = BatchMeasurement(
        batch_size=8,
        mode="single",
        threads=1,
        calls=threads,
        extra={"pack_batch_size": 20, "bytemlperf_keep_fraction": 0.6},
    )
    result = _result_of(m)
    assert figure_interval(result, "QPS", 20)[0] is not None
    assert figure_interval(result, "QPS", 8) == (None, "")


def test_bytemlperf_figures_never_come_from_a_replicas_run_and_c2_figures_stand_at_the_card_batch():
    replicas = BatchMeasurement(
        batch_size=2, mode="replicas", threads=2, calls=[calls_of([2.0, 3.0] * 10)] * 2
    )
    single = BatchMeasurement(
        batch_size=4, mode="single", threads=1, calls=[calls_of([2.0, 3.0] * 10)]
    )
    assert figure_interval(_result_of(replicas), "QPS", 2) == (None, "")
    # 2 per replica x 2 replicas
    assert figure_interval(_result_of(replicas), "Latency", 4)[0] is not None
    # one IPU: the call's batch
    assert figure_interval(_result_of(single), "Latency", 4)[0] is not None
    assert figure_interval(_result_of(single), "Latency", 8) == (None, "")
    assert figure_interval(None, "QPS", 4) == (None, "")


def test_rows_without_a_result_carry_no_noise_or_power_note():
    card = bytemlperf_rows([]) + c2_rows([])
    assert card and all(
        r.noisy == "" and r.indicative == "" and r.measured_batch == "" for r in card
    )
    assert all(r.run == "" and r.measured_hardware == "" and r.measured is None for r in card)
    assert all(r.verdict == Verdict.NOT_MEASURED for r in card)
    c2 = c2_rows([])
    assert {r.reason for r in c2} == {"C2 study not run"}


def test_a_measured_row_without_power_flags_has_none(rows):
    assert all(r.indicative == "" and r.noisy == "" for r in rows.values())
    # the accuracy row has no batch
    assert {r.measured_batch for r in rows.values()} == {"32", "4", ""}
    assert rows[("bytemlperf_c600", "Top-1", "")].measured_batch == ""


def test_accuracy_is_judged_by_its_own_rule_not_the_ten_percent_one():
    run = c600_run()
    # 91 % of 0.76963: within 10 %
    run.accuracy = [{"metric": "Top-1", "value": 0.70, "status": "measured"}]
    card = {
        (r.study, r.figure): r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL and r.precision == PRECISION
    }
    assert card[("bytemlperf_c600", "Top-1")].verdict == Verdict.DIFFERS


C2_EFFICIENCY = PublishedFigure(
    study="c2_qwant",
    figure="Energy efficiency",
    model="resnext101-c2",
    precision="FP16 (mixed)",
    batch=4,
    unit="images/s/W",
    value=10.0,
    published_study="c2_qwant",
    source="seed 003",
)


def test_a_figure_not_measured_keeps_no_power_flag():
    r = _row(
        C2_EFFICIENCY,
        MeasuredFigure(
            value=None,
            result=None,
            path=None,
            reason=Reason("power unavailable: no sensor", ReasonCode.POWER_UNAVAILABLE),
            indicative="indicative only: a 2 s window",
        ),
    )
    assert r.indicative == "" and r.noisy == "" and r.reason == "power unavailable: no sensor"
    m = _row(
        C2_EFFICIENCY,
        MeasuredFigure(
            value=9.0,
            result=None,
            path=None,
            reason=Reason(""),
            indicative="indicative only: a 2 s window",
        ),
    )
    # the window's own noise: none
    assert m.indicative == "indicative only: a 2 s window" and m.noisy == ""
    assert m.reason.endswith("; indicative only: a 2 s window") and m.measured_batch == "4"


def test_a_noisy_window_and_a_power_flag_are_both_named():
    m = BatchMeasurement(
        batch_size=2, mode="replicas", threads=2, calls=[calls_of([2.0, 3.0] * 10)] * 2
    ).to_dict()
    m["noise"] = {"noisy": True, "reasons": ["CPU steal 9% > 5%"]}
    result = _result_of()
    result.measurements = [m]
    r = _row(
        C2_EFFICIENCY,
        MeasuredFigure(
            value=9.0,
            result=result,
            path=Path("c2.json"),
            reason=Reason(""),
            indicative="indicative only: a 2 s window",
        ),
    )
    assert r.noisy == "noisy: CPU steal 9% > 5%" and r.indicative == "indicative only: a 2 s window"
    assert r.reason.endswith("; noisy: CPU steal 9% > 5%; indicative only: a 2 s window")
    assert r.run == "c2.json"


def test_a_window_stopped_at_its_limit_wider_than_its_target_is_flagged_noisy():
    """A batch-32 figure at ±35 % against a 5 % target (the window ran out of time) carried no
    mark while a noisy batch 4 of the same row did."""
    from kit.publish.glance import flags

    m = BatchMeasurement(
        batch_size=2, mode="replicas", threads=2, calls=[calls_of([2.0, 3.0] * 10)] * 2
    ).to_dict()
    m["precision"] = {"target_ci": 0.05, "reached": 0.35, "met": False, "stopped_by": "time limit"}
    result = _result_of()
    result.measurements = [m]
    measured = MeasuredFigure(value=9.0, result=result, path=Path("c2.json"), reason=Reason(""))
    r = _row(C2_EFFICIENCY, measured)
    wide = "noisy: its interval stayed at ±35.0%, wider than its ±5% target (time limit)"
    assert r.noisy == wide and r.reason.endswith(f"; {wide}") and flags(r) == " (noisy window)"
    m["precision"].update(reached=0.04, met=True, stopped_by="target reached")
    result.measurements = [m]
    assert _row(C2_EFFICIENCY, measured).noisy == ""


def test_why_an_accuracy_or_diff_figure_is_missing():
    from kit.publish.scorecard import OWN_INPUTS, RANDOM_DIFF, metric_value

    run = c600_run()
    run.accuracy, run.numerics = [], []
    run.model = {"weights": {"source": "random"}}
    assert metric_value(run, "Top-1") == (None, Reason("random weights", ReasonCode.RANDOM_WEIGHTS))
    assert metric_value(run, "Mean Diff") == (None, RANDOM_DIFF)
    run.model = {"weights": {"source": "data/weights/resnet50"}}
    assert metric_value(run, "Top-1") == (None, Reason("no dataset", ReasonCode.NO_DATASET))
    # nor numerics
    assert metric_value(run, "Mean Diff") == (None, Reason("no dataset", ReasonCode.NO_DATASET))
    run.numerics = [{"batch_size": 4, "mean_abs": 0.01}]
    assert metric_value(run, "Mean Diff") == (None, OWN_INPUTS)
    # no accuracy
    assert metric_value(run, "Top-1") == (None, Reason("no dataset", ReasonCode.NO_DATASET))
    assert metric_value(run, "QPS") == (None, Reason("not computed", ReasonCode.OTHER))


def test_where_the_headline_batch_was_not_run_the_best_qps_stands_in_not_comparable():
    from tests.c600_runs import measured

    run = c600_result(
        MODEL, PRECISION, [measured(4, 4, 7000.0), measured(8, 4, 9000.0), measured(2, 4, 5000.0)]
    )
    head = next(
        r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL
        and r.precision == PRECISION
        and r.study == "bytemlperf_c600"
        and r.figure == "QPS"
    )
    assert head.measured == pytest.approx(9000.0) and head.measured_batch == "8"
    assert head.verdict == Verdict.NOT_COMPARABLE and head.ratio == pytest.approx(9000.0 / 13499)


def test_a_batch_without_a_qps_never_stands_in_for_the_headline():
    from tests.c600_runs import measured

    run = c600_result(MODEL, PRECISION, [measured(4, 4, 0.5, n=5), measured(8, 4, 0.4, n=5)])
    # a window too short to time
    run.measurements[1] = replace(run.measurements[1], qps_bytemlperf=None)
    head = next(
        r
        for r in bytemlperf_rows([(Path("r.json"), run)])
        if r.model == MODEL
        and r.precision == PRECISION
        and r.study == "bytemlperf_c600"
        and r.figure == "QPS"
    )
    assert head.measured == pytest.approx(0.5) and head.measured_batch == "4"
