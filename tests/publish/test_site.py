"""kit.publish.site: the index's list of the runs kept, from state.json and the run folders."""

import json

from kit.publish.site import write_index

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
