"""Issue 27: a figure is "reproduced" or "differs" only when measured on the published part the
published way (batch, clients, precision, passes, pack mode, PopRT version); ByteMLPerf's own
latency definitions; the default run measures every published batch size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kit.backends.ipu.settings import plan_for
from kit.batch.profiles import jobs_for
from kit.measure.window import BatchMeasurement
from kit.publish.scorecard import bytemlperf_rows
from kit.published import figures as published
from kit.results import RunResult
from kit.results.reasons import DifferenceCode, Reason
from kit.results.session import Session
from kit.results.windows import Measurement
from tests.c600_runs import c600_result, calls_of, measured


def card(result: RunResult) -> list:
    """The result's own rows of the scorecard."""
    return [
        r
        for r in bytemlperf_rows([(Path("r.json"), result)])
        if r.model == result.parameters["model"]
        and r.precision == result.parameters["published_precision"]
    ]


def row(rows, figure: str, study: str = "bytemlperf_c600", batch: str | None = None):
    return next(
        r
        for r in rows
        if r.figure == figure and r.study == study and (batch is None or r.batch_size == batch)
    )


def resnet50_the_published_way() -> RunResult:
    """resnet50 FP16 on a C600 at both published batches, 4 clients, the headline within 2 %."""
    published_qps = published.ipu_run_settings("resnet50-torch-fp32", "FP16")["per_batch"][1][
        "Performance/QPS"
    ]
    return c600_result(
        "resnet50-torch-fp32",
        "FP16",
        [measured(4, 4, 7062.0), measured(32, 4, published_qps * 0.98)],
    )


def test_a_c600_run_the_published_way_is_judged():
    result = resnet50_the_published_way()
    rows = card(result)
    headline = row(rows, "QPS")
    assert headline.batch_size == "32" and headline.verdict == "reproduced", headline.reason
    per_batch = row(rows, "QPS", "bytemlperf_reports", "4")
    assert per_batch.verdict == "reproduced"


def test_each_batch_is_judged_by_the_session_that_timed_it():
    """Each batch loads its own session: one that left out a pass at batch 4 makes batch 4's
    figures not comparable, though the headline's session (batch 32) was ByteMLPerf's recipe."""
    result = resnet50_the_published_way()
    short = Session.from_dict(
        {**result.backend.session.to_dict(), "comparable": False, "missing_passes": ["a_pass"]}
    )
    result.measurements[0] = replace(result.measurements[0], session=short)
    result.measurements[1] = replace(result.measurements[1], session=result.backend.session)
    rows = card(result)
    at_4 = row(rows, "QPS", "bytemlperf_reports", "4")
    assert at_4.verdict == "not comparable" and "ByteMLPerf's a_pass not applied" in at_4.reason
    assert row(rows, "QPS").verdict == "reproduced"


def test_a_batch_searched_to_another_precision_is_judged_at_its_own():
    """Where each batch is searched, a batch may run another precision than the headline's."""
    result = resnet50_the_published_way()
    result.measurements[0] = replace(
        result.measurements[0], searched_plan={"backend": "ipu", "precision": "fp8"}
    )
    rows = card(result)
    at_4 = row(rows, "QPS", "bytemlperf_reports", "4")
    assert at_4.verdict == "not comparable" and "precision fp8, published fp16" in at_4.reason
    assert "ipu fp8" in at_4.measured_hardware and "ipu fp16" in row(rows, "QPS").measured_hardware
    assert row(rows, "QPS").verdict == "reproduced"


def test_a_c600_run_at_another_batch_size_is_not_comparable():
    result = c600_result("resnet50-torch-fp32", "FP16", [measured(8, 4, 13542.0)])
    rows = card(result)
    headline = row(rows, "QPS")
    assert (
        headline.verdict == "not comparable" and "batch 8, published at batch 32" in headline.reason
    )
    assert headline.measured_batch == "8" and headline.ratio == pytest.approx(
        13542.0 / 13499.0, rel=1e-3
    )
    per_batch = row(card(result), "QPS", "bytemlperf_reports", "32")
    assert (
        per_batch.verdict == "not measured" and "batch 32 not run (measured: 8)" in per_batch.reason
    )
    # the same part at the published batch but one client instead of four
    result = c600_result("resnet50-torch-fp32", "FP16", [measured(32, 1, 13542.0)])
    headline = row(card(result), "QPS")
    assert (
        headline.verdict == "not comparable" and "1 client(s), published with 4" in headline.reason
    )


def test_deberta_unpacked_is_not_comparable_naming_the_missing_pass():
    plan = plan_for("deberta-torch-fp32", "fp16")
    session = {
        "comparable": plan.comparable,
        "missing_passes": list(plan.missing_passes),
        "notes": list(plan.notes),
    }
    result = c600_result(
        "deberta-torch-fp32", "FP16", [measured(10, 1, 1702.0)], poprt="1.3.0", session=session
    )
    headline = row(card(result), "QPS")
    assert headline.verdict == "not comparable"
    assert "ByteMLPerf's deberta_pack not applied" in headline.reason
    assert "padded batches, published in pack mode" in headline.reason


def test_another_poprt_version_is_named():
    result = c600_result("clip-onnx-fp32", "FP16", [measured(40, 3, 7305.0)], poprt="1.4.0")
    headline = row(card(result), "QPS")
    assert published.poprt_version("clip-onnx-fp32", "FP16") == "1.3.0"
    assert (
        headline.verdict == "not comparable"
        and "PopRT 1.4.0, published with PopRT 1.3.0" in headline.reason
    )
    same = c600_result("clip-onnx-fp32", "FP16", [measured(40, 3, 7305.0)], poprt="1.3.0")
    assert row(card(same), "QPS").verdict == "reproduced"


def test_another_precision_is_not_comparable():
    result = c600_result(
        "resnet50-torch-fp32", "FP8", [measured(32, 4, 18851.0)], ipu_precision="fp16"
    )
    headline = row(card(result), "QPS")
    assert (
        headline.verdict == "not comparable" and "precision fp16, published fp8" in headline.reason
    )


def test_trimmed_latency_is_bytemlperfs_definition():
    """engine_poprt.benchmark: each thread drops its first and last 20 calls (when it made more than
    40); AVG = mean of the kept durations, P99 = sorted(kept)[int(0.99 n)]; QPS = clients x batch x
    kept calls per thread / (last kept end - first kept start)."""
    slow_ends = [50.0] * 20  # warm-up-like slow calls at both ends: ByteMLPerf drops them
    middle = [float(10 + (i % 7)) for i in range(60)]  # 10..16 ms, unequal
    thread = calls_of(slow_ends + middle + slow_ends)
    m = BatchMeasurement(batch_size=8, mode="single", threads=1, calls=[thread])
    kept = sorted(middle)
    assert m.bytemlperf["avg_latency_ms"] == pytest.approx(sum(kept) / 60)
    assert m.bytemlperf["p99_latency_ms"] == kept[int(0.99 * 60)]
    assert m.bytemlperf["qps"] == pytest.approx(8 * 60 / (sum(middle) / 1000))
    # all calls, kept beside
    assert m.latency.mean_ms == pytest.approx((sum(middle) + 40 * 50) / 100)
    assert m.latency.p99_ms > 16  # the slow ends count in the all-calls figures
    # 40 calls: ByteMLPerf trims nothing
    short = BatchMeasurement(batch_size=8, mode="single", threads=1, calls=[calls_of(middle[:40])])
    assert short.bytemlperf["avg_latency_ms"] == pytest.approx(sum(middle[:40]) / 40)
    assert "no trim" in short.bytemlperf["kept"]


def test_pack_mode_keeps_the_middle_sixty_percent_and_has_intervals():
    durations = [30.0] * 20 + [float(5 + i % 3) for i in range(60)] + [30.0] * 20
    m = BatchMeasurement(
        batch_size=1,
        mode="pack",
        threads=2,
        calls=[calls_of(durations), calls_of(durations, 10**9)],
        extra={"bytemlperf_keep_fraction": 0.6, "pack_batch_size": 40},
    )
    kept = sorted([float(5 + i % 3) for i in range(60)] * 2)
    assert m.bytemlperf["kept_calls"] == 120 and m.bytemlperf["avg_latency_ms"] == pytest.approx(
        sum(kept) / 120
    )
    assert m.intervals["bytemlperf_avg_latency_ms"].available
    assert m.intervals["qps_bytemlperf"].available


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_every_profile_measures_every_published_batch_size(profile):
    for kind in ("cpu", "ipu"):
        jobs = {j.name: j.parameters for j in jobs_for(profile, kind)}
        for _, r in published.headline_rows().iterrows():
            settings = published.ipu_run_settings(r.model, r.precision)
            params = jobs[f"{r.model}_{r.precision}"]
            assert params["batch_sizes"] == settings["batch_sizes"]
            assert params["clients"] == (settings["clients"] if kind == "ipu" else 1)
            if kind == "ipu":
                # enough calls for ByteMLPerf's trim of 20 at each end
                assert params["min_count"] > 40


def test_the_batch_a_measurement_stands_for():
    def measured_batch(d):
        return Measurement.from_dict(d).measured_batch

    # pack mode: the pack's
    assert measured_batch({"batch_size": 1, "extra": {"pack_batch_size": 40}}) == 40
    assert (
        measured_batch({"batch_size": 8, "extra": None}) == 8
        and measured_batch({"batch_size": 8}) == 8
    )


def test_each_way_a_measurement_differs_from_the_published_run():
    from kit.publish.comparability import PublishedRun
    from kit.publish.comparability import measurement_differences as typed

    def measurement_differences(d, run):
        return [r.text for r in typed(Measurement.from_dict(d), run)]

    padded = PublishedRun(32, 4, "fp16", "1.4.0", pack=False)
    assert (
        measurement_differences({"batch_size": 32, "mode": "clients", "threads": 4}, padded) == []
    )
    assert measurement_differences({"batch_size": 8, "mode": "single", "threads": 1}, padded) == [
        "batch 8, published at batch 32",
        "1 client(s), published with 4",
    ]
    assert (
        measurement_differences(
            {"batch_size": 8, "mode": "clients", "threads": 4},
            # no batch published
            PublishedRun(None, 4, "fp16", "1.4.0", pack=False),
        )
        == []
    )
    packed = PublishedRun(40, 1, "fp16", "1.3.0", pack=True)
    pack = {"batch_size": 1, "mode": "pack", "threads": 2, "extra": {"pack_batch_size": 40}}
    assert measurement_differences(pack, packed) == []  # pack mode: its threads are not clients
    assert measurement_differences({"batch_size": 40, "mode": "single", "threads": 1}, packed) == [
        "padded batches, published in pack mode"
    ]
    # replicas are not clients: one client each
    one_client = PublishedRun(8, 1, "fp16", "1.4.0", pack=False)
    assert (
        measurement_differences({"batch_size": 8, "mode": "replicas", "threads": 2}, one_client)
        == []
    )


def test_the_sessions_own_reasons_come_after_the_passes_it_missed():
    from kit.publish.comparability import session_differences

    assert session_differences({"comparable": True, "not_comparable": ["x"]}) == []
    said = session_differences(
        {
            "comparable": False,
            "missing_passes": ["deberta_pack", "insert_attention_mask"],
            "not_comparable": ["padded batches, published in pack mode"],
        }
    )
    assert [r.text for r in said] == [
        "ByteMLPerf's deberta_pack, insert_attention_mask not applied",
        "padded batches, published in pack mode",
    ]
    # a reason written without a code: SESSION
    assert [r.code for r in said] == ["passes", "session"]
    assert session_differences(
        {
            "comparable": False,
            "not_comparable": ["packed samples attend"],
            "not_comparable_codes": ["packed_attention"],
        }
    ) == [
        # the code the session wrote
        Reason("packed samples attend", DifferenceCode.PACKED_ATTENTION)
    ]
    assert session_differences({"comparable": False}) == [
        Reason(
            "the session's settings are not ByteMLPerf's (see its notes)", DifferenceCode.SESSION
        )
    ]


def test_the_published_run_of_a_row():
    from kit.publish.comparability import PublishedRun

    run = PublishedRun.of("resnet50-torch-fp32", "FP8", 32)
    assert (run.batch, run.clients, run.precision, run.pack) == (32, 4, "fp8", False)
    assert run.poprt_version == published.poprt_version("resnet50-torch-fp32", "FP8")
    assert PublishedRun.of("bert-torch-fp32", "FP16", 40).clients == 1
