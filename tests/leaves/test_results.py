"""Results read back: a schema-1 result written by an earlier kit (tests/data/results_v1, written
before the typed records) opens, is upgraded in one place, reads as typed sections, compares and
re-publishes."""

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import KitError
from kit.publish.scorecard import measured_hardware
from kit.results import SCHEMA_VERSION, ResultStatus, RunResult, UnsupportedVersion, version_problem
from kit.results.schema import upgrade
from kit.results.sections import BackendInfo, Environment, Sections
from kit.results.session import Placement

V1 = Path(__file__).parents[1] / "data" / "results_v1"
MODEL, C2 = V1 / "resnet50-torch-fp32_FP16.json", V1 / "c2_study.json"


def test_the_fixtures_are_schema_1_and_open_at_the_current_version():
    for path in (MODEL, C2):
        assert json.loads(path.read_text())["schema_version"] == 1
        result = RunResult.read(path)
        assert result.schema_version == SCHEMA_VERSION == 5 and result.status == "ok"


def test_upgrade_fills_the_keys_version_1_added_and_leaves_its_input_alone():
    data = {
        "schema_version": 1,
        "environment": {"cpu": {}},
        "model": {"name": "m"},
        "numerics": [{"mean_abs": 0.1}],
    }
    up = upgrade(data)
    assert (
        up["schema_version"] == 5
        and data["schema_version"] == 1
        and "kit" not in data["environment"]
    )
    assert up["environment"]["kit"] is None and up["environment"]["distributions"] == {}
    assert up["model"]["onnx_sha256"] is None and up["numerics"][0]["histograms"] is None
    assert upgrade(up) is up  # version 5: nothing to do


@pytest.mark.parametrize("version", [0, 6, 99, None, "1", True])
def test_a_version_this_kit_does_not_read_is_named(version):
    assert "is not supported (this kit reads 1 to 5)" in version_problem(
        {"schema_version": version}
    )
    with pytest.raises(KitError):
        RunResult.from_dict(
            {
                "schema_version": version,
                "kind": "model_benchmark",
                "name": "x",
                "parameters": {},
                "environment": {},
            }
        )
    with pytest.raises(UnsupportedVersion):
        upgrade({"schema_version": version})


def test_a_schema_1_model_benchmark_reads_as_typed_sections():
    s = RunResult.read(MODEL).sections
    assert (
        isinstance(s, Sections)
        and isinstance(s.backend, BackendInfo)
        and isinstance(s.environment, Environment)
    )
    assert (s.backend.name, s.backend.precision, s.backend.device) == ("onnxruntime", "fp32", "cpu")
    assert (
        s.backend.device_info.peak.gflops == pytest.approx(332.8)
        and s.backend.session.items["threads"] == 2
    )
    assert s.model.weights.source == "random" and s.model.random_weights and s.model.opset == 17
    assert s.environment.kit.commit.startswith("e6be931") and s.environment.cpu.cores == 2
    assert [m.batch_size for m in s.measurements] == [1, 32] and [
        m.measured_batch for m in s.measurements
    ] == [1, 32]
    raw = json.loads(MODEL.read_text())["measurements"][1]
    m = s.measurements[1]  # the stored figures, never recomputed
    assert (m.qps_bytemlperf, m.throughput, m.latency.mean_ms) == (
        raw["qps_bytemlperf"],
        raw["throughput"],
        raw["latency"]["mean_ms"],
    )
    assert (
        m.bytemlperf.p99_latency_ms == raw["bytemlperf"]["p99_latency_ms"]
        and m.power.method == "unavailable"
    )
    assert (
        m.interval("throughput")["low"] == raw["intervals"]["throughput"]["low"]
        and m.interval("nothing") is None
    )
    assert s.accuracy[0].metric == "Top-1" and not s.accuracy[0].measured
    assert (
        s.tables.roofline[0].bound == "memory"
        and s.tables.c2 == ()
        and s.tables.search_decision is None
    )


def test_a_schema_1_c2_study_reads_its_table():
    rows = RunResult.read(C2).sections.tables.c2
    assert [r.batch_size for r in rows] == [2, 4] and all(r.throughput > 0 for r in rows)
    assert all(
        r.efficiency is None and r.reasons["efficiency"].startswith("power unavailable")
        for r in rows
    )


def test_a_result_without_a_backend_or_model_reads_as_none():
    s = RunResult.new("model_benchmark", "failed", {}, {}).sections
    assert (
        s.backend is None
        and s.model is None
        and s.measurements == ()
        and s.session.comparable is None
    )
    assert s.environment.kit is None and s.environment.gpus is None


def test_a_schema_1_result_is_written_back_at_the_current_version_and_reads_the_same(tmp_path):
    result = RunResult.read(MODEL)
    again = RunResult.read(result.write(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert (
        again.sections.measurements == result.sections.measurements
        and again.measurements == result.measurements
    )
    assert (
        again.sections.environment == result.sections.environment
        and again.sections.backend == result.sections.backend
    )


def test_a_schema_1_result_compares_and_republishes(tmp_path, monkeypatch):
    from kit.publish import bytemlperf_export, report, scorecard
    from kit.publish.compare_runs import compare_runs

    monkeypatch.setenv("KIT_OUTPUTS", str(tmp_path))
    text, page = compare_runs(MODEL, MODEL, tmp_path / "compare.html")
    assert "resnet50-torch-fp32" in text and page.exists() and "left out" not in text
    card = scorecard.build([MODEL, C2])
    headline = card[
        (card.study == "bytemlperf_c600")
        & (card.model == "resnet50-torch-fp32")
        & (card.precision == "FP16")
        & (card.figure == "QPS")
    ].iloc[0]
    raw = json.loads(MODEL.read_text())["measurements"][1]
    assert headline.measured == raw["qps_bytemlperf"] and headline.verdict == "not comparable"
    result = RunResult.read(MODEL)
    assert "kit e6be931d3dfe (clean)" in report.provenance(result)
    assert not report.bytemlperf_table(result).empty
    path = bytemlperf_export.export(result, tmp_path / "r.json")
    assert json.loads(path.read_text())["Performance"][1]["BS"] == 32
    from kit.publish.site import result_problem, stored_sections

    assert result_problem(MODEL) is None  # the index shows it, not as unreadable
    assert stored_sections(V1, {"results": MODEL.name}).tables.time_account.phases


def test_a_table_an_older_kit_wrote_differently_is_kept_as_written_and_the_rest_reads(tmp_path):
    from kit.publish import scorecard

    data = json.loads(MODEL.read_text())
    data["tables"]["roofline"] = [{"no_batch_size": 1}]  # not a roofline row this kit reads
    result = RunResult.from_dict(data)
    s = result.sections
    assert s.measurements[0].batch_size == 1 and s.tables.time_account.total_s > 0  # the rest reads
    assert s.tables.roofline == () and s.tables.more == {"roofline": [{"no_batch_size": 1}]}
    again = RunResult.read(result.write(tmp_path / "r.json"))
    assert again.to_dict()["tables"]["roofline"] == [{"no_batch_size": 1}]  # written back as read
    rows = scorecard.bytemlperf_rows([(MODEL, result)])
    assert any(r.measured is not None for r in rows)
    from kit.publish.report.views import roofline_view, time_view

    assert "in a form this kit does not read" in str(roofline_view(result))  # not a wrong reason
    assert "in a form" not in str(time_view(result))


def test_the_sections_follow_the_records_a_notebook_replaces():
    result = RunResult.read(MODEL)
    placement = Placement.from_dict(
        {"kernels": 4, "kernels_by_provider": {"CPUExecutionProvider": 1}}
    )
    result.backend = replace(
        result.backend, session=replace(result.backend.session, placement=placement)
    )
    assert result.sections.session.placement.on_cpu == 1  # read afresh, never a stale copy
    assert result.to_dict()["backend"]["session"]["placement"]["kernels"] == 4


def test_a_compile_that_fell_back_to_eager_is_not_labelled_compiled():
    """torch.compile failing at load (past dynamo's recompile limit) keeps the eager module and
    records why as the session's `compile_fallback`; the compile option alone labelled the scorecard
    row 'compiled'. The note beside it is for people: reworded, it changes nothing."""
    backend = {
        "name": "torch",
        "precision": "fp16",
        "device": "cuda",
        "options": {"compile": True},
        "session": {"compile_fallback": "recompile limit", "notes": ["compiling did not work out"]},
    }
    result = RunResult.new("model_benchmark", "m", {}, {"cpu": {"model": "x"}})
    result.backend = BackendInfo.from_dict(backend)
    assert not BackendInfo.from_dict(backend).compiled and " compiled" not in measured_hardware(
        result
    )
    result.backend = BackendInfo.from_dict(
        {**backend, "session": {"notes": ["fell back to eager, said a note"], "compile_s": 12.0}}
    )
    assert result.backend.compiled and " compiled" in measured_hardware(result)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_result_whose_only_trace_of_a_fallback_is_its_note_reads_as_not_compiled(version):
    note = "torch.compile failed (recompile limit); fell back to eager"
    backend = {
        "name": "torch",
        "precision": "fp16",
        "device": "cuda",
        "options": {"compile": True},
        "session": {"notes": [note], "compile_s": None},
    }
    older = RunResult.from_dict(
        {
            "schema_version": version,
            "kind": "model_benchmark",
            "name": "m",
            "parameters": {},
            "environment": {},
            "backend": backend,
        }
    )
    assert older.backend.session.compile_fallback == "recompile limit"
    assert not older.sections.backend.compiled
    again = RunResult.from_dict(
        {**older.to_dict(), "backend": {**backend, "session": {"notes": []}}}
    )
    assert again.sections.backend.compiled  # no note, no fallback


def test_a_time_account_without_its_total_reads_as_not_recorded_not_zero():
    """A missing total is no zero: the index says nothing of it and the report leaves it blank."""
    from kit.publish.report.tables import time_table
    from kit.publish.site import time_split
    from kit.results.tables import TimeAccount

    raw = {"phases": [{"phase": "timing", "seconds": 4.0}]}
    account = TimeAccount.from_dict(raw)
    assert account.total_s is None and account.other_s is None
    assert time_split(account, 10.0) == "—"
    result = RunResult(
        kind="model_benchmark",
        name="x",
        parameters={},
        environment={},
        tables={"time_account": raw},
    )
    rows = time_table(result).set_index("phase")
    assert rows.loc["timing", "seconds"] == 4.0
    assert pd.isna(rows.loc["total", "seconds"]) and pd.isna(rows.loc["other", "seconds"])


def test_a_peak_written_as_a_float_reads_as_whole_bytes():
    """Resources.peak_rss_bytes is an int (mypy, strict on kit/results/): 1.5e9 reads as
    1500000000."""
    from kit.results.sections import Resources

    assert Resources.from_dict({"peak_rss_bytes": 1.5e9}).peak_rss_bytes == 1_500_000_000
    assert Resources.from_dict({"peak_rss_bytes": float("nan")}).peak_rss_bytes is None
    assert Resources.from_dict({"peak_rss_bytes": True}).peak_rss_bytes is None


def test_a_result_status_reads_as_its_enum_and_writes_the_same_string(tmp_path):
    result = RunResult.new("model_benchmark", "m", {}, {})
    assert result.status is ResultStatus.OK
    result.fail("broken")
    path = result.write(tmp_path / "m.json")
    assert json.loads(path.read_text())["status"] == "error"
    assert RunResult.read(path).status is ResultStatus.ERROR


def test_an_unknown_result_status_is_named_with_the_allowed_ones(tmp_path):
    data = RunResult.new("model_benchmark", "m", {}, {}).to_dict() | {"status": "fine"}
    with pytest.raises(KitError, match="unknown result status 'fine'; known: error, ok"):
        RunResult.from_dict(json.loads(json.dumps(data)))


def test_a_json_object_that_is_no_result_is_a_kit_error_naming_what_it_lacks(tmp_path):
    """It was a TypeError from the constructor, naming neither the file nor a missing key."""
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "name": "x", "status": "ok"}))
    lacks = r"other\.json: not a result: it has no 'kind', 'parameters'"
    with pytest.raises(KitError, match=lacks):
        RunResult.read(path)
