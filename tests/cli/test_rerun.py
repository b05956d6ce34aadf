"""`kit rerun RESULT.json` end to end on a small model: the batch records the job, a re-run checks
commit, packages and hardware first, stops on a downgraded package naming both versions, and with
--allow-drift runs the job again into a new run folder and prints the comparison."""

import functools
import importlib.metadata
import json

import pytest

from kit.batch import Job
from kit.batch.runner import run_jobs
from kit.cli.main import main
from kit.cli.rerun import drift, recorded_job
from kit.errors import KitError
from kit.hardware.drift import differences
from kit.paths import notebooks_dir
from kit.publish.site import latest_records
from kit.results import RunResult
from tests.fake_executor import FakeExecutor

SMALL = {
    "model": "resnet50-torch-fp32",
    "small": True,
    "batch_sizes": [1],
    "warmup": 1,
    "min_duration_s": 0.05,
    "min_count": 3,
    "target_ci": 0.0,
    "accuracy": False,
}


def test_rerun_checks_the_environment_then_reruns_and_compares(outputs, tmp_path, capsys):
    [first] = run_jobs(
        [Job("resnet50_small", "model_benchmark.ipynb", dict(SMALL), 300)],
        out=outputs,
        command="kit reproduce --profile quick --hardware cpu --only resnet50_small",
    )
    assert first.status == "ok", first.message
    path = outputs / first.results
    recorded = json.loads(path.read_text())["environment"]["job"]
    assert recorded["parameters"] == SMALL and recorded["notebook"] == "model_benchmark.ipynb"
    assert (
        recorded["batch_command"]
        == "kit reproduce --profile quick --hardware cpu --only resnet50_small"
    )
    assert recorded["rerun"] == f"kit rerun {path}"
    assert drift(*recorded_job(path)) == []  # the same tree, venv and machine: nothing drifted

    data = json.loads(path.read_text())
    numpy = importlib.metadata.version("numpy")
    newer = f"{int(numpy.split('.')[0]) + 1}.0.0"
    # as if numpy had been downgraded since the run
    data["environment"]["distributions"]["numpy"] = newer
    downgraded = tmp_path / "downgraded.json"
    downgraded.write_text(json.dumps(data))
    runs_before = sorted((outputs / "runs").iterdir())
    assert main(["rerun", str(downgraded)]) == 2
    err = capsys.readouterr().err
    assert f"package numpy: {newer} in the result, {numpy} here" in err and "not re-run" in err
    assert "differs from the result's in 1 way" in err  # the only difference
    assert sorted((outputs / "runs").iterdir()) == runs_before  # nothing ran

    assert main(["rerun", str(downgraded), "--allow-drift"]) == 0
    out = capsys.readouterr().out
    assert f"drift (allowed): package numpy: {newer} in the result, {numpy} here" in out
    assert (
        f"A = {downgraded}" in out
        and "resnet50-torch-fp32" in out
        and "Environment differences:" in out
    )
    new_runs = [p for p in (outputs / "runs").iterdir() if p not in runs_before]
    assert len(new_runs) == 1
    again = RunResult.read(new_runs[0] / "resnet50_small.json")
    assert again.status == "ok" and again.environment.job["parameters"] == SMALL
    assert again.environment.job["batch_command"] == f"kit rerun {downgraded}"
    assert (new_runs[0] / "bytemlperf").is_dir()  # the re-run exports too


def test_a_result_without_a_batch_job_cannot_be_rerun(tmp_path, capsys):
    path = RunResult.new(
        "summary", "x", {}, {"job": {"rerun": None, "how": "an interactive run"}}
    ).write(tmp_path / "x.json")
    assert main(["rerun", str(path)]) == 2
    err = capsys.readouterr().err
    assert "records no batch job (an interactive run)" in err and str(path) in err
    assert main(["rerun", str(tmp_path / "missing.json")]) == 2
    assert "no such result file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert main(["rerun", str(tmp_path / "bad.json")]) == 2
    assert "bad.json: not a result JSON (JSONDecodeError" in capsys.readouterr().err


def recorded(tmp_path, **job):
    """A result that records the batch job `job` (name, notebook...), as a result file could say."""
    job = {
        "name": "published_results",
        "notebook": "published_results.ipynb",
        "parameters": {},
        "timeout_s": 300,
        **job,
    }
    return RunResult.new("published_results", "x", {}, {"job": job}).write(
        tmp_path / "given" / "x.json"
    )


def written_outside(tmp_path, outputs):
    """Every file under tmp_path but outside outputs/ and the given result's folder."""
    return [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and outputs not in p.parents and p.parent != tmp_path / "given"
    ]


@pytest.mark.parametrize("name", ["../../../../escaped", "/tmp/escaped", "a/b", "..", ""])
def test_a_recorded_job_name_that_is_not_a_plain_name_is_refused(outputs, tmp_path, capsys, name):
    """Issue 51: a result whose job name was `../../../../<folder>/escaped` re-ran and wrote
    escaped.json, .html, .ipynb and bytemlperf/ outside outputs/."""
    path = recorded(tmp_path, name=name)
    assert main(["rerun", str(path), "--allow-drift"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: its recorded job cannot be re-run: invalid job name={name!r}: a plain name" in err
    )
    assert not (outputs / "runs").exists() and written_outside(tmp_path, outputs) == []


@pytest.mark.parametrize("notebook", ["../../x/evil.ipynb", "/tmp/evil.ipynb", "gone.ipynb"])
def test_only_the_project_s_own_notebooks_are_re_run(outputs, tmp_path, capsys, notebook):
    """Issue 51: `--allow-drift` executed a notebook from any path a result named, and a missing
    one was a raw FileNotFoundError."""
    path = recorded(tmp_path, notebook=notebook)
    assert main(["rerun", str(path), "--allow-drift"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(
            f"error: {path}: its recorded job cannot be re-run: notebook {notebook!r} is not "
            "one of the project's notebooks in "
        )
        and "model_benchmark.ipynb" in err
    )
    assert len(err.splitlines()) == 1 and not (outputs / "runs").exists()


def test_the_drift_list_names_the_notebook(outputs, tmp_path):
    path = recorded(tmp_path, notebook_sha256="0" * 64)
    [line] = [d for d in drift(*recorded_job(path)) if d.startswith("notebook")]
    assert line.startswith(
        f"notebook {notebooks_dir() / 'published_results.ipynb'}: sha256 000000000000 "
        "in the result, "
    )


def test_a_recorded_folder_to_write_in_outside_outputs_is_refused(outputs, tmp_path, capsys):
    """The server study writes its LoadGen logs where `output_dir` says: a re-run keeps it in
    outputs/."""
    path = recorded(
        tmp_path,
        name="server_scenario",
        notebook="server_scenario.ipynb",
        parameters={"output_dir": str(tmp_path / "elsewhere")},
    )
    assert main(["rerun", str(path), "--allow-drift"]) == 2
    assert (
        f"invalid path='{tmp_path / 'elsewhere'}': a path inside {outputs}"
        in capsys.readouterr().err
    )
    assert not (outputs / "runs").exists() and written_outside(tmp_path, outputs) == []


@pytest.mark.parametrize("relative", ["notebooks/escaped", "kit"])
def test_a_recorded_relative_folder_is_read_from_the_job_s_working_folder(
    outputs, tmp_path, relative
):
    """The job runs in the project root (Task.spec's cwd) and opens `output_dir` from there: a
    relative one that is inside outputs/ only when read from outputs/ is refused too."""
    path = recorded(
        tmp_path,
        name="server_scenario",
        notebook="server_scenario.ipynb",
        parameters={"output_dir": relative},
    )
    with pytest.raises(KitError, match="its recorded job cannot be re-run: invalid path="):
        recorded_job(path)


def test_a_recorded_relative_folder_under_outputs_is_kept(outputs, tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_NOTEBOOKS", str(notebooks_dir()))
    monkeypatch.setenv("KIT_ROOT", str(tmp_path))  # outputs/ is <root>/outputs
    path = recorded(
        tmp_path,
        name="server_scenario",
        notebook="server_scenario.ipynb",
        parameters={"output_dir": "outputs/loadgen"},
    )
    assert recorded_job(path)[1].parameters["output_dir"] == "outputs/loadgen"


def test_a_schema_1_result_without_distributions_says_they_were_not_recorded(tmp_path):
    """The upgrade to version 2 fills a missing `distributions` and `published_data` with {}: the
    drift list then said every installed package was 'not installed in the result' and every
    published file 'added', where the result simply did not record them."""
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "kind": "model_benchmark",
                "name": "x",
                "status": "ok",
                "created_at": "2026-01-01T00:00:00",
                "parameters": {},
                "environment": {},
            }
        )
    )
    recorded = RunResult.read(path).environment.to_dict()
    now = {
        "kit": {"commit": "a" * 40},
        "distributions": {"numpy": "2.0", "torch": "2.13"},
        "cpu": {"model": "x"},
        "gpus": [],
        "ipu_present": False,
        "published_data": {"reports.csv": "f" * 64},
    }
    lines = differences(recorded, now)
    assert "packages: the installed distributions were not recorded in the result" in lines
    assert "published data: its hashes were not recorded in the result" in lines
    assert not [
        line for line in lines if line.startswith(("package numpy", "published data reports.csv"))
    ]


ROW = {"model": "resnet50-torch-fp32", "batch_sizes": [1, 32], "published_precision": "FP16"}


def fake_batch(outputs, monkeypatch):
    """A batch of two model rows run by the fake executor (no notebook), and `kit rerun` set to run
    with it too: {job name: record}."""
    executor = FakeExecutor()
    monkeypatch.setattr("kit.cli.rerun.run_jobs", functools.partial(run_jobs, executor=executor))
    jobs = [
        Job("resnet50-torch-fp32_FP16", "model_benchmark.ipynb", dict(ROW), 300),
        Job(
            "resnet50-torch-fp32_FP8",
            "model_benchmark.ipynb",
            {**ROW, "published_precision": "FP8"},
            300,
        ),
    ]
    records = run_jobs(
        jobs,
        out=outputs,
        executor=executor,
        command="kit reproduce --profile quick --hardware cpu",
        labels={"profile": "quick", "hardware": "cpu"},
    )
    return {r.name: r for r in records}


def failing_copy(outputs, record, tmp_path):
    """The record's result, as if its job had recorded a parameter that makes it fail."""
    data = json.loads((outputs / record.results).read_text())
    data["environment"]["job"]["parameters"]["fake_error"] = "RuntimeError: out of memory"
    path = tmp_path / "failing.json"
    path.write_text(json.dumps(data))
    return path


def test_a_rerun_neither_becomes_the_index_s_batch_nor_replaces_the_state(
    outputs, tmp_path, monkeypatch, capsys
):
    """A rerun of one job made the index list that job alone ("Profile , hardware ."), and a failed
    rerun replaced the batch's ok record of the job in state.json, so the index showed the error."""
    batch = fake_batch(outputs, monkeypatch)
    before = json.loads((outputs / "state.json").read_text())["jobs"]
    fp8, fp16 = batch["resnet50-torch-fp32_FP8"], batch["resnet50-torch-fp32_FP16"]
    assert main(["rerun", str(outputs / fp8.results), "--allow-drift"]) == 0
    assert main(["rerun", str(failing_copy(outputs, fp16, tmp_path)), "--allow-drift"]) == 1
    state = json.loads((outputs / "state.json").read_text())
    assert state["jobs"] == before  # the batch's records stand
    runs = [r for r in state["runs"] if r.get("rerun_of")]
    assert len(runs) == 2 and all((outputs / "runs" / r["run_id"]).is_dir() for r in runs)
    capsys.readouterr()
    assert main(["site"]) == 0
    page = (outputs / "index.html").read_text()
    assert "Profile <code>quick</code>, hardware <code>cpu</code>." in page
    reports = page.split("<h2>Reports</h2>")[1].split("<h2>Runs kept</h2>")[0]
    assert f"href='{fp16.html}'" in reports and f"href='{fp8.html}'" in reports
    assert "out of memory" not in reports
    assert main(["rebuild-state"]) == 0  # read back from outputs/runs/: the batch's records
    rebuilt = json.loads((outputs / "state.json").read_text())["jobs"]
    assert {n: (r["run_id"], r["status"]) for n, r in rebuilt.items()} == {
        n: (r.run_id, "ok") for n, r in batch.items()
    }
    assert [r["name"] for r in latest_records(outputs)] == list(batch)


@pytest.mark.parametrize("allow", [["--allow-drift"], []])
def test_recorded_parameters_the_study_refuses_are_refused_before_anything_runs(
    outputs, tmp_path, capsys, allow
):
    """A result recording batch_sizes "lots" started its notebook, made a run folder, failed inside
    with InvalidParameter, then said "kit compare: nothing compared"."""
    path = recorded(
        tmp_path,
        name="resnet50-torch-fp32_FP16",
        notebook="model_benchmark.ipynb",
        parameters={**ROW, "batch_sizes": "lots"},
    )
    assert main(["rerun", str(path), *allow]) == 2
    out, err = capsys.readouterr()
    assert (
        f"error: {path}: its recorded parameters are not valid for the model_benchmark study: "
        "invalid batch_sizes='lots': a list of integers" in err
    )
    assert "re-running" not in out and "kit compare" not in out
    assert not (outputs / "runs").exists() and written_outside(tmp_path, outputs) == []
