"""Issue 53, item 1: every reason on a scorecard row this kit writes carries its code from where it
was made (the accuracy check, the C2 table, the IPU session, the scorecard), through the result
JSON, to the glance, which reads only codes. An older kit's sentences are read in two named places
(kit.results.schema.update_to_3 with kit.results.legacy, and kit.publish.legacy_rows), nowhere else.

Each test gives a sentence that, read as text, would say another code: the row must follow the
code."""

from __future__ import annotations

import inspect
from pathlib import Path

from kit.publish import glance, legacy_rows, scorecard
from kit.publish.scorecard import bytemlperf_rows, c2_rows
from kit.results import RunResult
from kit.results.reasons import DifferenceCode, Reason, ReasonCode
from kit.results.schema import upgrade
from kit.studies.c2 import c2_row
from tests.c600_runs import c600_result, measured

MODEL, PRECISION = "resnet50-torch-fp32", "FP16"
LYING = "not measured: no dataset (a sentence that reads as no_dataset)"


def _model_run(accuracy: dict, session: dict | None = None) -> RunResult:
    run = c600_result(MODEL, PRECISION, [measured(4, 4, 7000.0)], session=session)
    run.model = {"weights": {"source": "data/weights/resnet50"}}
    run.accuracy = [{"metric": "Top-1", "value": None, **accuracy}]
    return run


def _row(rows, figure: str, study: str = "bytemlperf_c600", batch: str | None = None):
    return next(
        r
        for r in rows
        if r.model == MODEL
        and r.precision == PRECISION
        and r.figure == figure
        and r.study == study
        and batch in (None, r.batch_size)
    )


def _written(run: RunResult, tmp_path: Path) -> RunResult:
    """Through the result JSON, as the scorecard reads it."""
    return RunResult.read(run.write(tmp_path / "r.json"))


def test_an_accuracy_checks_code_reaches_the_row_and_the_glance_not_its_sentence(tmp_path):
    run = _written(_model_run({"status": LYING, "reason_code": "no_reference"}), tmp_path)
    row = _row(bytemlperf_rows([(Path("r.json"), run)]), "Top-1")
    assert row.reason == LYING.removeprefix("not measured: ") and row.reason_code == "no_reference"
    assert glance.short_reason(row) == "no fp32 reference session"


def test_a_c2_tables_code_reaches_the_row_not_its_sentence(tmp_path):
    from tests.publish.test_scorecard_known_answers import c2_measurement

    table = c2_row(4, 2, c2_measurement(2, 5.0, None))
    assert table["efficiency_reason_code"] == "power_unavailable"  # made with the sentence
    run = RunResult.new("c2_study", "c2", {}, {})
    run.backend = {
        "name": "ipu",
        "precision": "fp16",
        "device": "ipu",
        "device_info": {"kind": "ipu"},
    }
    run.tables = run.tables.with_table(
        "c2", [{**table, "efficiency_reason": "timed out: a sentence that reads as timed_out"}]
    )
    rows = c2_rows([(Path("c2.json"), _written(run, tmp_path))])
    eff = next(r for r in rows if r.figure == "Energy efficiency" and r.batch_size == "4")
    assert eff.reason.startswith("timed out") and eff.reason_code == "power_unavailable"
    assert glance.short_reason(eff) == "power unavailable"


def test_the_ipu_sessions_codes_reach_the_row_and_its_sentence_is_said_not_read(tmp_path):
    said = "batch 4, published at batch 32"  # an older kit's batch difference, word for word
    session = {
        "comparable": False,
        "not_comparable": [said],
        "not_comparable_codes": ["packed_attention"],
    }
    run = _written(_model_run({"status": "measured", "value": 0.76}, session), tmp_path)
    row = _row(bytemlperf_rows([(Path("r.json"), run)]), "QPS")
    assert row.reason_code == "measured_another_way"
    assert row.differences[0] == said and row.difference_codes[0] == "packed_attention"
    assert glance.differences(row)[0] == said  # its first clause, not "another batch size"


def test_a_result_written_today_is_never_parsed_an_older_one_is_upgraded_once():
    older = {
        "schema_version": 2,
        "environment": {},
        "accuracy": [{"metric": "Top-1", "status": LYING}],
        "tables": {"c2": [{"batch_size": 4, "efficiency_reason": "power unavailable: no sensor"}]},
        "backend": {"session": {"comparable": False, "not_comparable": ["x"]}},
    }
    up = upgrade(older)
    assert up["accuracy"][0]["reason_code"] == "no_dataset"  # read from its sentence, here only
    assert up["tables"]["c2"][0]["efficiency_reason_code"] == "power_unavailable"
    assert up["backend"]["session"]["not_comparable_codes"] == ["session"]
    assert "reason_code" not in older["accuracy"][0]  # the input left as it was
    today = RunResult.from_dict(
        {**older, "schema_version": 3, "kind": "model_benchmark", "name": "x", "parameters": {}}
    )
    s = today.sections  # written today without a code: said by its sentence, never read from it
    assert s.accuracy[0].reason == Reason(LYING.removeprefix("not measured: "), ReasonCode.OTHER)
    assert s.tables.c2[0].reason_of("efficiency").code == ReasonCode.OTHER
    assert s.session.differences == (Reason("x", DifferenceCode.SESSION),)


def test_a_failed_batch_is_read_from_the_table_the_run_wrote_never_from_its_errors():
    run = c600_result(MODEL, PRECISION, [measured(4, 4, 7000.0)])
    run.errors = ["batch 32: a sentence only an older kit's result is read for"]
    rows = bytemlperf_rows([(Path("r.json"), run)])
    assert _row(rows, "AVG Latency", "bytemlperf_reports", "32").reason_code == "batch_not_run"
    run.tables = run.tables.with_table(
        "failed_batches", [{"batch_size": 32, "error": "out of memory"}]
    )
    row = _row(bytemlperf_rows([(Path("r.json"), run)]), "AVG Latency", "bytemlperf_reports", "32")
    assert row.reason_code == "batch_failed" and "batch 32 failed: out of memory" in row.reason


def test_an_older_row_is_coded_in_one_place_and_a_coded_row_is_left_alone():
    card = scorecard.build([])
    row = next(
        r
        for r in map(legacy_rows.Comparison.of, card.to_dict("records"))
        if r.reason_code == "not_run"
    )
    lying = legacy_rows.Comparison.of(
        {**row.to_dict(), "reason": "timed out: read me and you are wrong"}
    )
    assert legacy_rows.coded(lying) is lying and glance.short_reason(lying) == "not run"
    older = legacy_rows.Comparison.of({**lying.to_dict(), "reason_code": ""})
    assert legacy_rows.coded(older).reason_code == "timed_out"


def test_the_glance_and_the_scorecard_read_no_sentence():
    assert "\nimport re\n" not in inspect.getsource(glance)  # not one regular expression
    for module in (glance, scorecard):
        source = inspect.getsource(module)
        assert "re.match" not in source and "re.search" not in source and "text_code" not in source
        assert "TEXT_CODES" not in source and "DIFFERENCES" not in source
        # a failed batch is a table, not an error's prefix
        assert 'startswith(f"batch' not in source
