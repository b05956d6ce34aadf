"""kit.publish.site: the index's list of the runs kept, from state.json and the run folders."""

import json
import re

import pytest

from kit.notebook import report_links
from kit.publish import card_table, scorecard
from kit.publish.site import write_index
from kit.published.studies import PublishedStudy
from kit.results import ResultKind, RunResult

RECORD = {
    "notebook": "q.ipynb",
    "status": "ok",
    "duration_s": 1.0,
    "fingerprint": "f",
}


def record(name, run_id):
    files = {k: f"runs/{run_id}/{name}.{k}" for k in ("ipynb", "html", "json")}
    return {
        **RECORD,
        "name": name,
        "run_id": run_id,
        "notebook_out": files["ipynb"],
        "html": files["html"],
        "results": files["json"],
    }


def ran(out, run_id, *names):
    """A run folder in which `names` ran (their record beside their results) and batch.run."""
    folder = out / "runs" / run_id
    folder.mkdir(parents=True)
    for name in names:
        (folder / f"{name}.record").write_text(json.dumps(record(name, run_id)))
        (folder / f"{name}.json").write_text("{}")
    (folder / "batch.run").write_text("{}")


def kept(out):
    page = write_index([record("a", "r1"), record("b", "r1")], out).read_text()
    items = page.split("<h2>Runs kept</h2><ul>")[1].split("</ul>")[0]
    return [i.removeprefix("<li>") for i in items.split("</li>") if i]


def test_the_runs_kept_say_how_many_jobs_ran_and_how_many_were_reused(tmp_path):
    """A run folder holding only batch.run (every job reused) said '2 notebooks', and a run of one
    job '1 notebooks'."""
    ran(tmp_path, "r1", "a", "b")
    ran(tmp_path, "r2")
    ran(tmp_path, "r3", "b")
    ran(tmp_path, "r4", "a")
    runs = [
        {"run_id": "r1", "jobs": ["a", "b"], "status": "complete", "finished_at": "t1"},
        {"run_id": "r2", "jobs": ["a", "b"], "status": "complete", "finished_at": "t2"},
        {"run_id": "r3", "jobs": ["a", "b"], "status": "complete", "finished_at": "t3"},
        {
            "run_id": "r4",
            "jobs": ["a"],
            "status": "complete",
            "finished_at": "t4",
            "rerun_of": "runs/r1/a.json",
        },
    ]
    jobs = {"a": record("a", "r1"), "b": record("b", "r3")}
    (tmp_path / "state.json").write_text(json.dumps({"jobs": jobs, "runs": runs}))
    assert kept(tmp_path) == [
        "<code>runs/r4/</code> (re-run of runs/r1/a.json: 1 notebook run, complete, finished t4)",
        "<code>runs/r3/</code> (2 notebooks: 1 run, 1 reused, complete, finished t3)",
        "<code>runs/r2/</code> (2 notebooks: 0 run, 2 reused, complete, finished t2)",
        "<code>runs/r1/</code> (2 notebooks: 2 run, 0 reused, complete, finished t1)",
    ]


def model_result(out, run_id, created_at, error=""):
    """A model row's result of resnet50-torch-fp32 FP16 in runs/<run_id>/, with its report."""
    result = RunResult(
        ResultKind.MODEL_BENCHMARK,
        "resnet50-torch-fp32",
        parameters={"model": "resnet50-torch-fp32", "published_precision": "FP16"},
        environment={},
    )
    result.created_at = created_at
    if error:
        result.fail(error)
    folder = out / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    path = result.write(folder / f"{JOB}.json")
    path.with_suffix(".html").write_text("<html></html>")
    return path


JOB = "resnet50-torch-fp32_FP16"


@pytest.fixture
def ok_then_failed(tmp_path, monkeypatch):
    """outputs/ holding an ok result of the row (run r1) and a later failed one (run r2)."""
    out = tmp_path / "outputs"
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    model_result(out, "r1", "2026-01-01T00:00:00")
    model_result(out, "r2", "2026-01-02T00:00:00", "InvalidParameter: invalid batch_sizes='lots'")
    return out


def row_hrefs(page):
    """The hrefs of the ResNet-50 FP16 rows' model links in a scorecard table."""
    return set(re.findall(r"<a href='([^']*)'>resnet50-torch-fp32 FP16</a>", page))


def test_each_summary_row_links_to_the_report_of_the_result_it_shows(ok_then_failed):
    """The summary showed the ok result's figures (scorecard._latest_ok) and linked them to the
    later failed run's report (the latest run's HTML of the job, whatever its status)."""
    out = ok_then_failed
    card = scorecard.build(
        scorecard.result_paths([])
    )  # every result under outputs/runs/, as with ONLY=summary
    links = report_links([], str(out / "runs" / "r3" / "summary.json"))
    page = card_table.study_table(card, PublishedStudy.BYTEMLPERF_C600, links)
    assert row_hrefs(page) == {f"../r1/{JOB}.html"}
    rows = card[(card.model == "resnet50-torch-fp32") & (card.precision == "FP16")]
    assert set(rows.run_path) == {f"runs/r1/{JOB}.json"}  # the row names the result it read


def test_the_index_s_scorecard_links_its_rows_to_their_results_reports(ok_then_failed):
    """A batch of the summary alone (ONLY=summary) indexed its scorecard with no model report
    linked: the links were only those of the batch's own jobs."""
    out = ok_then_failed
    summary = RunResult.new("summary", "summary", {}, {})
    summary.tables = summary.tables.with_table(
        "scorecard", scorecard.build(scorecard.result_paths([])).to_dict("records")
    )
    summary.write(out / "runs" / "r3" / "summary.json")
    (out / "runs" / "r3" / "summary.html").write_text("<html></html>")
    page = write_index([record("summary", "r3")], out).read_text()
    assert row_hrefs(page) == {f"runs/r1/{JOB}.html"}
