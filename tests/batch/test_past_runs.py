"""`kit reproduce --plan` says what the same batch took here before (kit.batch.past_runs), read
from the state the batches wrote; a state it cannot read, or none, costs the line only."""

from __future__ import annotations

import json
import shutil

import pytest

from kit.batch import Job
from kit.batch.past_runs import last_measured
from kit.batch.runner import run_jobs
from kit.batch.state import RECORD_SUFFIX
from tests.batch_notebooks import make_ok_notebook
from tests.conftest import ROOT


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder)
    make_ok_notebook(folder / "tiny.ipynb")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    return [Job("one", "tiny.ipynb", {}), Job("two", "tiny.ipynb", {})]


def entry(outputs, run_id):
    return next(
        r for r in json.loads((outputs / "state.json").read_text())["runs"] if r["run_id"] == run_id
    )


def test_a_batch_is_found_by_its_profile_hardware_and_jobs_with_what_it_ran_and_reused(
    outputs, tiny
):
    labels = {"profile": "quick", "hardware": "cpu"}
    first = run_jobs(tiny, out=outputs, labels=labels)
    run = entry(outputs, first[0].run_id)
    assert (run["profile"], run["hardware"]) == ("quick", "cpu")
    line = last_measured(outputs, "quick", "cpu", {"one", "two"})
    assert line.startswith(f"MEASURED here before: batch {first[0].run_id} (quick on cpu, ")
    assert "with 2 of its 2 jobs run (0 not ok) and 0 reused" in line
    seconds = float(line.split(" took ")[1].split(" min")[0]) * 60
    assert seconds >= sum(r.duration_s for r in first) - 6  # start to end, to the minute's tenth

    # a batch that reused every job took seconds: the line is still the one that ran them
    assert all(r.reused for r in run_jobs(tiny, out=outputs, labels=labels))
    assert last_measured(outputs, "quick", "cpu", {"one", "two"}) == line
    for other in (
        ("full", "cpu", {"one", "two"}),
        ("quick", "cuda", {"one", "two"}),
        ("quick", "cpu", {"one"}),
    ):
        assert last_measured(outputs, *other) == "", other


def test_an_unlabelled_or_unfinished_batch_or_an_unreadable_state_gives_no_line(outputs, tiny):
    run_jobs(tiny, out=outputs)  # an older kit's batch: no profile or hardware
    assert last_measured(outputs, "quick", "cpu", {"one", "two"}) == ""
    run_jobs(tiny, out=outputs, labels={"profile": "quick", "hardware": "cpu"})
    state = json.loads((outputs / "state.json").read_text())
    state["runs"][-1]["status"] = "interrupted"
    (outputs / "state.json").write_text(json.dumps(state))
    assert last_measured(outputs, "quick", "cpu", {"one", "two"}) == ""
    state["runs"][-1]["status"] = "complete"
    state["runs"][-1]["run_id"] = "../../elsewhere"  # a path from a file is never followed
    (outputs / "state.json").write_text(json.dumps(state))
    # its records are not read outside outputs/runs: it ran nothing this can see
    assert last_measured(outputs, "quick", "cpu", {"one", "two"}) == ""
    (outputs / "state.json").write_text("{not json")
    assert last_measured(outputs, "quick", "cpu", {"one", "two"}) == ""
    assert last_measured(outputs / "absent", "quick", "cpu", {"one"}) == ""


def test_kit_reproduce_plan_prints_what_the_same_batch_took_here(outputs, capsys, monkeypatch):
    from kit.cli.main import main
    from kit.search import candidates

    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)  # planned as without one

    jobs = ["resnet50-torch-fp32_FP16", "resnet50-torch-fp32_FP8"]
    run = {
        "run_id": "20261203-120000-1-abcd",
        "profile": "quick",
        "hardware": "cuda",
        "jobs": jobs,
        "started_at": "2026-12-03T12:00:00",
        "finished_at": "2026-12-03T12:07:30",
        "status": "complete",
    }
    (outputs / "state.json").write_text(json.dumps({"jobs": {}, "runs": [run]}))
    folder = outputs / "runs" / run["run_id"]
    folder.mkdir(parents=True)
    (folder / f"{jobs[0]}{RECORD_SUFFIX}").write_text(json.dumps({"status": "ok"}))
    assert main(["reproduce", "--plan", "--hardware", "cuda", "--only", "resnet50"]) == 0
    assert (
        "MEASURED here before: batch 20261203-120000-1-abcd (quick on cuda, 2026-12-03T12:00:00) "
        "took 7.5 min from start to end, with 1 of its 2 jobs run (0 not ok) and 1 reused"
    ) in capsys.readouterr().out
    assert (
        main(["reproduce", "--plan", "--hardware", "cuda", "--only", "resnet50-torch-fp32_FP16"])
        == 0
    )
    assert "MEASURED" not in capsys.readouterr().out  # another set of jobs


def test_kit_reproduce_labels_its_batch_with_its_profile_and_hardware(
    outputs, tmp_path, monkeypatch
):
    from kit.cli.main import main

    folder = tmp_path / "own-notebooks"
    folder.mkdir()
    make_ok_notebook(folder / "ok.ipynb")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    monkeypatch.setattr("kit.cli.reproduce.jobs_for", lambda *a, **k: [Job("row", "ok.ipynb")])
    assert main(["reproduce", "--hardware", "cpu"]) == 0
    run = json.loads((outputs / "state.json").read_text())["runs"][-1]
    assert (run["profile"], run["hardware"], run["status"]) == ("quick", "cpu", "complete")
    assert "with 1 of its 1 jobs run (0 not ok)" in last_measured(outputs, "quick", "cpu", {"row"})
