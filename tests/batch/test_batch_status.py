"""kit.batch.status: how a job ended and where a batch run stands, enums that read and write the
strings state.json and the per-job records hold."""

import json

import pytest

from kit.batch.jobs import STATUSES, JobRecord
from kit.batch.outcome import Outcome, result_status
from kit.batch.state import state_problem
from kit.batch.status import FINISHED_RUNS, BatchRunStatus, JobStatus
from kit.errors import UnknownValueError
from kit.publish.site import latest_batch, latest_records

RECORD = {
    "name": "quick",
    "notebook": "q.ipynb",
    "status": "timeout",
    "run_id": "r1",
    "duration_s": 1.0,
    "fingerprint": "f",
    "notebook_out": "runs/r1/quick.ipynb",
    "html": "runs/r1/quick.html",
    "results": "runs/r1/quick.json",
}


def test_the_values_are_the_strings_state_json_holds():
    assert [s.value for s in JobStatus] == [
        "ok",
        "error",
        "failed",
        "timeout",
        "killed",
        "interrupted",
    ]
    assert STATUSES == tuple(JobStatus)
    assert {s.value for s in BatchRunStatus} == {
        "running",
        "complete",
        "interrupted",
        "aborted",
        "rebuilt",
    }
    assert FINISHED_RUNS == {"complete", "rebuilt"}


def test_a_record_reads_its_status_as_a_member_and_writes_the_same_string():
    record = JobRecord.from_dict(RECORD)
    assert record.status is JobStatus.TIMEOUT
    written = json.loads(json.dumps(record.to_dict()))
    assert {k: written[k] for k in RECORD} == RECORD
    assert type(record.to_dict()["status"]) is str


@pytest.mark.parametrize(
    "make",
    [
        lambda: JobRecord.from_dict({**RECORD, "status": "finished"}),
        lambda: Outcome("finished", "", 0.0),
    ],
)
def test_an_unknown_job_status_is_named_with_the_allowed_ones(make):
    with pytest.raises(
        UnknownValueError,
        match="unknown job status 'finished'; known: error, "
        "failed, interrupted, killed, ok, timeout",
    ):
        make()


def test_the_state_check_names_an_unknown_status():
    problem = state_problem({"jobs": {"quick": {**RECORD, "status": "finished"}}, "runs": []})
    assert problem == "job 'quick' has unknown status 'finished'"
    assert state_problem({"jobs": {"quick": RECORD}, "runs": []}) is None


@pytest.mark.parametrize(
    "written, errors, status",
    [("ok", [], JobStatus.OK), ("ok", ["x"], JobStatus.ERROR), ("error", ["x"], JobStatus.ERROR)],
)
def test_a_finished_notebook_takes_its_results_status(tmp_path, written, errors, status):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"status": written, "errors": errors}))
    assert result_status(path)[0] is status
    assert result_status(tmp_path / "none.json")[0] is JobStatus.FAILED


def test_the_index_lists_the_latest_finished_run(tmp_path):
    jobs = {n: {**RECORD, "name": n, "status": "ok"} for n in ("a", "b", "c")}
    runs = [
        {"run_id": str(i), "jobs": [job], "status": status}
        for i, (job, status) in enumerate(
            [("a", "complete"), ("b", "rebuilt"), ("c", "interrupted"), ("c", "running")]
        )
    ]
    (tmp_path / "state.json").write_text(json.dumps({"jobs": jobs, "runs": runs}))
    assert [r["name"] for r in latest_records(tmp_path)] == ["b"]


def test_the_index_s_batch_is_never_a_rerun(tmp_path):
    jobs = {n: {**RECORD, "name": n, "status": "ok"} for n in ("a", "b")}
    runs = [
        {"run_id": "1", "jobs": ["a", "b"], "status": "complete", "profile": "quick"},
        {"run_id": "2", "jobs": ["b"], "status": "complete", "rerun_of": "runs/1/b.json"},
    ]
    (tmp_path / "state.json").write_text(json.dumps({"jobs": jobs, "runs": runs}))
    assert [r["name"] for r in latest_records(tmp_path)] == ["a", "b"]
    assert latest_batch(tmp_path)["profile"] == "quick"


def test_the_batch_summary_says_a_status_once_where_the_message_opens_with_it(capsys, tmp_path):
    from kit.cli.reproduce import _summary

    killed = JobRecord.from_dict(
        {**RECORD, "name": "a", "status": "killed", "message": "killed by SIGKILL (peak 2 GB)"}
    )
    failed = JobRecord.from_dict({**RECORD, "name": "b", "status": "failed", "message": "boom"})
    _summary([killed, failed], 1.0, tmp_path / "index.html")
    out = capsys.readouterr().out
    assert "  a: killed by SIGKILL (peak 2 GB)\n" in out
    assert "  b: failed: boom\n" in out


def test_the_progress_bar_counts_a_finished_notebook_and_not_an_interrupted_one(capsys):
    from kit.cli.reproduce import Progress

    bar = Progress(total=2)
    bar.start()
    bar(JobRecord.from_dict({**RECORD, "name": "a", "status": "ok"}))
    bar(JobRecord.from_dict({**RECORD, "name": "b", "status": "interrupted", "message": "stop"}))
    assert bar.bar.n == 1  # b is not done: the next run re-runs it
    bar.close()
    out = capsys.readouterr().out
    assert "interrupted  b" in out and "1/2" in out
