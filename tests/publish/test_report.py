from dataclasses import replace

import pytest

from kit.publish.report import (
    accuracy_table,
    beside_published,
    bytemlperf_table,
    interpretation,
    numerics_table,
    power_table,
    provenance,
    with_interval,
)
from kit.results.windows import Measurement
from kit.studies.model_benchmark import run as run_model_benchmark

FAST = dict(
    model="resnet50-torch-fp32",
    small=True,
    batch_sizes=[1, 2],
    warmup=1,
    min_duration_s=0.05,
    min_count=3,
    target_ci=0.0,
)


@pytest.fixture(scope="module")
def result():
    # 32: the published headline's batch
    return run_model_benchmark({**FAST, "batch_sizes": [1, 32]})


def test_tables_have_the_bytemlperf_columns(result):
    t = bytemlperf_table(result)
    assert list(t["BS"]) == [1, 32]
    assert {
        "QPS",
        "AVG Latency (ms)",
        "P99 Latency (ms)",
        "p50 (ms)",
        "p90 (ms)",
        "power method",
    } <= set(t.columns)
    assert t["power method"].str.startswith("unavailable: ").all()
    flops = result.model.flops_per_sample
    assert t["GFLOP/s"].iloc[1] == pytest.approx(
        flops * result.measurements[1].throughput / 1e9, rel=0.01, abs=0.051
    )  # shown to 0.1
    assert t["% of peak"].iloc[1] > 0
    assert list(numerics_table(result)["batch_size"]) == [1, 32]
    assert accuracy_table(result).iloc[0]["status"].startswith("not ")
    assert list(power_table(result)["batch_size"]) == [1, 32]


def test_beside_published_is_formatted_and_labelled(result):
    t = beside_published(result)
    headline = t.iloc[0]
    assert headline["figure"] == "QPS" and headline["verdict"] == "not comparable"
    assert headline["published"] == "13,499"  # as printed, not 1.3499e+04
    assert "e+" not in headline["measured"]


def test_gpu_placement_shows_the_cpu_share(result):
    import copy

    from kit.publish.report.provenance import gpu_placement
    from kit.results.session import Placement, Session

    placement = {
        "kernels_by_provider": {"CUDAExecutionProvider": 38, "CPUExecutionProvider": 2},
        "kernels": 40,
        "cpu_share": 0.05,
        "method": "ORT profile of one warm-up run",
    }
    line = gpu_placement(Session.from_dict({"placement": placement}))
    assert line == (
        "2 of 40 kernels on the CPU (5.0%); part of the graph runs on the host CPU: the GPU "
        "figures include that CPU work (CPU 2, CUDA 38; ORT profile of one warm-up run)"
    )
    assert gpu_placement(Session()) == ""  # a CPU session has no placement
    gpu = copy.deepcopy(result)
    gpu.backend = replace(
        gpu.backend, session=replace(gpu.backend.session, placement=Placement.from_dict(placement))
    )
    assert (
        "<th style='text-align:left'>GPU placement</th><td style='text-align:left'>2 of 40 kernels"
        in provenance(gpu)
    )
    assert "GPU placement" not in provenance(result)


def test_provenance_names_hardware_weights_and_method(result):
    page = provenance(result)
    for words in (
        "no IPU on this machine",
        "random initialisation",
        "onnxruntime",
        "perf_counter_ns",
        "Tolerances",
        "Allocator",
        "kit.measure.memory.steady_allocator",
        "at ONNX opset 17",
    ):
        assert words in page


def test_provenance_says_whose_session_and_parameters_it_shows(result):
    """A searched row showed the job's pre-search backend=torch beside the measured openvino, and
    the headline batch's static shapes as the row's session, unsaid."""
    import copy
    import html

    page = provenance(result)
    assert html.escape("the largest batch's (b32; each batch loads its own)") in page
    assert "; b1: the same settings" in page
    assert "before its search chose" not in page  # this run did not search
    searched = copy.deepcopy(result)
    searched.parameters = {**result.parameters, "search": True}
    assert html.escape("the job's, before its search chose") in provenance(searched)


def test_every_batch_records_the_session_it_timed_and_the_provenance_names_what_differs(result):
    from kit.publish.report.provenance import session_line

    headline = result.backend.session
    assert [m.session for m in result.measurements] == [headline, headline]
    more = {**headline.more, "cuda_graph": True}
    fell_back = replace(headline, compile_fallback="recompile limit", more=more)
    other = copy_with_sessions(result, [fell_back, headline])
    line = session_line(other, headline)
    assert line.endswith("; b1: cuda_graph=True, compile_fallback=recompile limit"), line
    older = copy_with_sessions(result, [None, None])
    assert session_line(older, headline).endswith(
        "; the other batches' sessions were not recorded (an older result)"
    )


def copy_with_sessions(result, sessions):
    import copy

    out = copy.deepcopy(result)
    out.measurements = [
        replace(m, session=s) for m, s in zip(out.measurements, sessions, strict=True)
    ]
    return out


def test_interpretation_for_ok_error_and_user_onnx(result, tmp_path):
    assert "not comparable" in interpretation(result)
    failed = run_model_benchmark({**FAST, "model": "nope"})
    assert "did not complete" in interpretation(failed)
    from kit.models import export_model

    onnx = export_model("resnet50-torch-fp32", small=True).onnx_path
    own = run_model_benchmark({**FAST, "model": str(onnx), "accuracy": False})
    assert own.status == "ok", own.errors
    assert "reached" in interpretation(own) and "not comparable" in interpretation(own)


def test_readable_numbers():
    from kit.publish.scorecard import readable

    assert readable(31446195.0, 6) == "31,446,195"
    assert readable(0.76963, 6) == "0.76963"
    assert readable(1474.16, 6) == "1,474.16"
    assert readable(21900.4, 4) == "21,900"
    assert readable(0.00161, 4) == "0.00161"
    assert readable(float("nan"), 4) == ""


def test_random_weights_sentence_says_what_a_diff_means(result):
    """Issue 14 #5: numeric diffs do depend on the weights; the report no longer says otherwise."""
    text = interpretation(result)
    assert "numeric diffs do not depend" not in text
    assert "numeric diffs do" in text and "not compared with the published Mean Diff" in text


def test_roofline_table_places_each_figure(result):
    from kit.publish.report import roofline_table

    t = roofline_table(result)
    assert list(t["batch_size"]) == [1, 32] and set(t["bound"]) <= {"compute", "memory"}
    assert (t["MB/sample (est.)"] > 0).all() and (t["FLOP/byte"] > 0).all()
    # weights shared by the batch
    assert t["MB/sample (est.)"].iloc[1] < t["MB/sample (est.)"].iloc[0]
    from kit.publish.report import peaks_table

    peaks = peaks_table(result)
    assert (
        list(peaks["precision"]) == ["fp32", "bf16", "fp16", "int8"]
        and peaks["method"].str.len().min() > 0
    )


def test_server_sentence_when_the_simulation_found_no_rate_under_the_bound():
    """A quick run measured b1 at p99 120 ms against a 100 ms bound: the simulator predicted no
    rate, and the sentence formatted None (TypeError, a failed notebook in `make reproduce`)."""
    from kit.publish.report import server_interpretation
    from kit.results import ResultKind, RunResult

    result = RunResult(
        ResultKind.SERVER_SCENARIO,
        "server_scenario",
        parameters={"latency_bound_ms": 100.0},
        environment={},
    )
    result.status = "ok"
    row = {
        "policy": "B=4, T=20 ms",
        "loadgen_best_qps": 5.15,
        "loadgen_p99_ms": 82.8,
        "loadgen_result": "INVALID",
        "loadgen_reasons": "",
        "sim_best_qps": None,
        "prediction_error_pct": None,
        "capacity_qps": 27.5,
    }
    result.tables = result.tables.with_table(
        "best", [row, {**row, "policy": "B=1, T=0 ms", "loadgen_best_qps": 0.89}]
    )
    text = server_interpretation(result)
    assert "B=4, T=20 ms: 5.15 QPS with p99 83 ms" in text
    assert "found no rate whose p99 stays under 100 ms" in text
    result.tables = result.tables.with_table(
        "best", [{**row, "sim_best_qps": 6.0, "prediction_error_pct": 16.5, "loadgen_p99_ms": None}]
    )
    text = server_interpretation(result)
    assert "predicted 6 QPS (+16 %)" in text and "p99 — (not recorded)" in text


def test_views_show_no_missing_value_and_an_empty_table_as_a_sentence(result):
    """Issue 27 #4: a report has no NaN or None cell, and an empty table is one sentence."""
    import pandas as pd

    from kit.publish.report import Sentence, search_view, view

    shown = view(pd.DataFrame({"a": [1.0, None], "b": ["x", None]}), "nothing")
    assert shown.to_dict("list") == {"a": [1.0, "—"], "b": ["x", "—"]}
    empty = view(pd.DataFrame(columns=["a"]), "Nothing to show.")
    assert isinstance(empty, Sentence) and empty._repr_html_() == "<p>Nothing to show.</p>"
    assert not result.parameters.get("search")
    assert search_view(result).text.startswith(
        "Not searched: this run used the configuration its parameters name"
    )


def test_power_is_said_once_where_no_window_had_it(result):
    import copy

    from kit.publish.report import Sentence, latency_view, power_view
    from kit.results.windows import Power

    reason = result.measurements[0].power.reason
    assert result.measurements[0].power.method != "measured"  # no sensor on this test machine
    said = power_view(result)
    assert isinstance(said, Sentence) and said.text == f"Power unavailable: {reason}."
    assert not {"power (W)", "samples/s/W", "power method"} & set(latency_view(result).columns)
    sensed = copy.deepcopy(result)
    power = Power.from_dict(
        {
            "method": "measured",
            "sensor": "rapl",
            "mean_w": 50.0,
            "samples_per_s_per_w": 2.0,
            "window_s": 12.0,
        }
    )
    sensed.measurements = [replace(m, power=power) for m in sensed.measurements]
    assert list(power_view(sensed)["power (W)"]) == [50.0, 50.0]
    assert {"power (W)", "samples/s/W", "power method"} <= set(latency_view(sensed).columns)


def test_a_report_opens_with_its_verdict_sentence_or_its_errors(result):
    from kit.publish.report import opening

    top = opening(result)
    assert (
        top.startswith("<div class='verdict'")
        and "against 13,499 samples/s published on the C600 at batch 32" in top
    )
    failed = run_model_benchmark({**FAST, "model": "nope"})
    assert "unknown model" in opening(failed) and "class='verdict'" not in opening(failed)


def test_a_skipped_c2_prediction_is_written_as_data_and_read_from_it_or_an_older_note(monkeypatch):
    """The server study writes why its C2 prediction was skipped as a table; the report reads that
    (an older result's note is read once, by the schema's upgrade), not a note containing 'C2'."""
    from kit.publish.report.server import server_c2_prediction
    from kit.results import ResultKind, RunResult
    from kit.studies import server
    from kit.studies.serving.batcher import BatchPolicy

    def no_card():
        raise FileNotFoundError("no C2 latencies")

    monkeypatch.setattr(server.published, "c2_latency_ms", no_card)
    result = RunResult(ResultKind.SERVER_SCENARIO, "s", parameters={}, environment={})
    result.notes.append("C2 card: a note that is not the reason")
    server._c2(result, None, [BatchPolicy(1, 0.0)], 100.0, 100, 0)
    assert result.tables.c2_prediction_skipped == "no C2 latencies"
    said = ["C2 prediction skipped: no C2 latencies"]
    assert list(server_c2_prediction(result)["note"]) == said
    older = {**result.to_dict(), "schema_version": 4, "tables": {}}
    assert list(server_c2_prediction(RunResult.from_dict(older))["note"]) == said
    result.notes[:] = ["C2 prediction skipped: no C2 latencies"]  # a note alone, today: no reason
    result.tables = result.tables.with_table("c2_prediction_skipped", "")
    assert "note" not in server_c2_prediction(result)


def test_a_table_shows_an_asymmetric_interval_as_its_bounds():
    """A report's batch-4 P99 read '19.91 ± 0.5672' for the interval [19.343, 19.910] and its
    batch-32 p50 '199.9 ± 162.6' for [132.0, 362.4]."""
    m = Measurement.from_dict(
        {
            "batch_size": 4,
            "intervals": {
                "bytemlperf_p99_latency_ms": {"value": 19.91, "low": 19.343117, "high": 19.910343},
                "p50_ms": {"value": 199.9, "low": 131.985549, "high": 362.426152},
                "throughput": {"value": 207.8, "low": 202.273128, "high": 213.368347},
            },
        }
    )
    assert with_interval(m, "bytemlperf_p99_latency_ms", 19.910343) == "19.91 [19.34, 19.91]"
    assert with_interval(m, "p50_ms", 199.872585) == "199.9 [132, 362.4]"
    assert with_interval(m, "throughput", 207.820737) == "207.8 ± 5.548"
    assert with_interval(m, "p90_ms", 19.86) == "19.86 (no interval: not recorded)"
