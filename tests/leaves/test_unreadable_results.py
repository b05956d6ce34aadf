"""A result JSON this kit cannot read (another schema_version, binary, not JSON): every command that
meets one names the file and why in one line, with a not-ok exit, and the batch runs it again
rather than reusing it."""

import json

import numpy as np
import pytest

from kit.batch import Job
from kit.batch.state import read_state
from kit.cli.main import main as kit_main
from kit.results import ResultKind, RunResult
from tests.batch_notebooks import make_ok_notebook
from tests.publish.test_compare_runs import _measurement


def _result(path, schema_version=1):
    r = RunResult(
        ResultKind.MODEL_BENCHMARK,
        "resnet50-torch-fp32",
        parameters={"published_precision": "FP16"},
        environment={"host": "h"},
    )
    r.measurements = [_measurement(np.random.default_rng(0), 10.0)]
    r.schema_version = schema_version
    r.write(path)
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.slow
def test_the_batch_reruns_and_kit_site_flags_a_result_of_another_schema_version(
    outputs, tmp_path, monkeypatch, capsys
):
    """The batch said 'ok (reused)' and `kit site` exited 0 over a result with schema_version 99."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    make_ok_notebook(folder / "ok.ipynb")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    monkeypatch.setattr("kit.cli.reproduce.jobs_for", lambda *a, **k: [Job("row", "ok.ipynb")])
    assert kit_main(["reproduce", "--hardware", "cpu"]) == 0
    result = outputs / read_state(outputs)["jobs"]["row"]["results"]
    data = json.loads(result.read_text())
    result.write_text(json.dumps({**data, "schema_version": 99}))
    capsys.readouterr()

    assert kit_main(["site"]) == 1
    line = _one_error_line(capsys)
    assert (
        str(result) in line and "schema_version 99 is not supported (this kit reads 1 to 5)" in line
    )
    assert "`make reproduce` runs them again" in line
    page = (outputs / "index.html").read_text()
    assert "unreadable: row.json: result schema_version 99 is not supported" in page
    assert "class='ok'>ok<" not in page

    assert kit_main(["reproduce", "--hardware", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("ok  row (" in line for line in lines) and not any(
        "(reused)" in line for line in lines
    ), lines
    assert kit_main(["site"]) == 0


def test_kit_compare_names_the_file_and_the_version(tmp_path, capsys):
    """`kit compare` said only 'a folder or file with result JSON holding measurements'."""
    good = _result(tmp_path / "a.json")
    (tmp_path / "b").mkdir()
    newer = _result(tmp_path / "b" / "row.json", schema_version=99)
    assert (
        kit_main(["compare", str(good), str(newer.parent), "--out", str(tmp_path / "x.html")]) == 2
    )
    line = _one_error_line(capsys)
    assert (
        str(newer) in line and "schema_version 99 is not supported (this kit reads 1 to 5)" in line
    )
    assert kit_main(["compare", str(newer), str(good), "--out", str(tmp_path / "x.html")]) == 2
    assert str(newer) in _one_error_line(capsys)
    assert not (tmp_path / "x.html").exists()


def test_kit_compare_names_a_result_it_left_out_beside_readable_ones(tmp_path, capsys):
    """A run folder with a readable result and one of another schema version was compared without a
    word about the one left out."""
    good = _result(tmp_path / "a.json")
    (tmp_path / "b").mkdir()
    _result(tmp_path / "b" / "ok.json")
    newer = _result(tmp_path / "b" / "row.json", schema_version=99)
    assert (
        kit_main(["compare", str(good), str(tmp_path / "b"), "--out", str(tmp_path / "x.html")])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        f"left out, this kit cannot read it: {newer}" in out
        and "schema_version 99 is not supported" in out
    )
    assert "Left out, this kit cannot read it:" in (tmp_path / "x.html").read_text()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
            "not a result JSON (not UTF-8 text: a binary file?)",
        ),
        (b'{"kind": ', "not a result JSON (JSONDecodeError: "),
        (
            json.dumps({"schema_version": 99}).encode(),
            "schema_version 99 is not supported (this kit reads 1 to 5)",
        ),
    ],
)
def test_kit_export_bytemlperf_names_a_file_that_is_not_a_result(tmp_path, capsys, content, why):
    """A binary file gave a raw UnicodeDecodeError."""
    bad = tmp_path / "result.json"
    bad.write_bytes(content)
    assert kit_main(["export-bytemlperf", str(bad)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: {bad}") and why in line, line
    assert not (tmp_path / "bytemlperf").exists()


def test_kit_export_bytemlperf_names_a_missing_file(tmp_path, capsys):
    assert kit_main(["export-bytemlperf", str(tmp_path / "nothere.json")]) == 2
    assert f"{tmp_path / 'nothere.json'}: no such result file" in _one_error_line(capsys)


def test_the_index_flags_a_result_whose_sections_this_kit_cannot_read(tmp_path):
    """Valid JSON of this schema, but a section of another shape: the index said 'ok' while the
    scorecard found it unreadable."""
    from kit.publish.site import result_problem

    path = _result(tmp_path / "row.json", schema_version=5)
    assert result_problem(path) is None
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "measurements": {"batch_size": 4}}))
    problem = result_problem(path)
    assert problem is not None and "measurements" in problem
