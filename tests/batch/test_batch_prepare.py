"""kit.batch.prepare: the exports a batch will load, made side by side before its first timed job
where the machine has the cores and memory for it; a failed one is left to its job."""

from __future__ import annotations

import json
import threading
import time

import pytest

from kit.batch import Job, local, prepare
from kit.batch.profiles import jobs_for
from kit.measure.memory import GB
from kit.models.requests import ExportRequest
from kit.results import ResultKind, RunResult

RESNET, SWIN, WIDEDEEP = (
    ExportRequest("resnet50-torch-fp32"),
    ExportRequest("swin-large-torch-fp32"),
    ExportRequest("widedeep-tf-fp32"),
)


def test_how_many_at_once_follows_the_cores_and_the_largest_export_s_memory():
    assert [round(r.need_bytes() / GB, 1) for r in (RESNET, SWIN, WIDEDEEP)] == [1.0, 4.0, 5.8]
    twelve = [RESNET] * 9 + [SWIN] * 3
    assert prepare.parallel_exports(twelve, cores=8, available=120 * GB) == 8  # one per core
    # 0.8 x 12 GB / 4.0 GB
    assert prepare.parallel_exports(twelve, cores=16, available=12 * GB) == 2
    # 9.6 / 5.8
    assert prepare.parallel_exports([RESNET, SWIN, WIDEDEEP], cores=8, available=12 * GB) == 1
    # one per export
    assert prepare.parallel_exports([RESNET, SWIN], cores=16, available=120 * GB) == 2
    assert prepare.parallel_exports(twelve, cores=2, available=20 * GB) == 2  # this 2-core machine
    # one core: nothing side by side
    assert prepare.parallel_exports(twelve, cores=1, available=20 * GB) == 1
    assert prepare.parallel_exports([], cores=16, available=120 * GB) == 0


def test_the_plan_counts_the_memory_a_cgroup_v1_limit_leaves(tmp_path, monkeypatch):
    """Issue 51: under a 3 GB `docker run -m` on a cgroup v1 host two exports ran at once on the
    host's 24 GB and the kernel killed them; the container's limit leaves room for one."""
    from kit.measure import memory

    (tmp_path / "meminfo").write_text("MemTotal: 25000000 kB\nMemAvailable: 24000000 kB\n")
    (tmp_path / "self").write_text("4:memory:/docker/abc\n0::/\n")
    (tmp_path / "cg" / "memory").mkdir(parents=True)
    (tmp_path / "cg" / "memory" / "memory.limit_in_bytes").write_text(f"{3 * 1024**3}\n")
    (tmp_path / "cg" / "memory" / "memory.usage_in_bytes").write_text(f"{1500 * 1024**2}\n")
    monkeypatch.setattr(memory, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(memory, "CGROUP", tmp_path / "cg")
    monkeypatch.setattr(memory, "SELF_CGROUP", tmp_path / "self")
    assert prepare.parallel_exports([RESNET, RESNET], cores=2) == 1  # 0.8 x (3.2 - 1.6 GB) / 1.0 GB


def test_the_missing_exports_are_each_job_s_model_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "empty"))
    jobs = jobs_for("quick", "cpu")
    wanted = prepare.missing_exports(
        jobs
        + [
            Job("bad", "model_benchmark.ipynb", {"model": "nosuchnet"}),
            Job("worse", "model_benchmark.ipynb", {"batch_sizes": [-3]}),
        ]
    )
    models = [r.model for r in wanted]
    # the FP8 rows and the server share their FP16 row's export
    assert len(models) == len(set(models))
    rows = {j.parameters["model"] for j in jobs if j.notebook == "model_benchmark.ipynb"}
    assert set(models) == rows | {"resnext101-c2"}
    assert all(r.opset == 17 and r.weights == "random" and not r.small for r in wanted)
    small = Job("small", "model_benchmark.ipynb", {"model": "resnet50-torch-fp32", "small": True})
    # small exports are quick and run in the job's process
    assert prepare.missing_exports([small]) == []


def test_the_cached_exports_are_not_asked_for_again(small, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))
    cached = ExportRequest(small.name, small=True)
    assert cached.cached()
    # the IPU's opset: another file
    assert not ExportRequest(small.name, small=True, opset=11).cached()
    assert not ExportRequest(small.name, small=True, seed=3).cached()  # other random weights


def test_exports_run_side_by_side_and_one_failing_leaves_the_others(monkeypatch, capsys):
    running, peak, lock = [0], [0], threading.Lock()

    def export(self):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        if self.model == "bert-torch-fp32":
            raise RuntimeError("exporter crashed\nsecond line")

    monkeypatch.setattr(ExportRequest, "export", export)
    requests = [
        ExportRequest(m)
        for m in (
            "resnet50-torch-fp32",
            "bert-torch-fp32",
            "albert-torch-fp32",
            "roberta-torch-fp32",
        )
    ]
    records = prepare.export_all(requests, 2)
    assert peak[0] == 2 and [r["model"] for r in records] == [r.model for r in requests]
    assert [r["error"] for r in records] == [None, "RuntimeError: exporter crashed", None, None]
    # one JSON line each, for the batch to read
    assert len(capsys.readouterr().out.splitlines()) == 4
    done = prepare.prepared(records, 2, 12.34)
    assert done.made == ("resnet50-torch-fp32", "albert-torch-fp32", "roberta-torch-fp32")
    assert done.summary() == (
        "exported 3 model(s) to ONNX side by side before the first job (2 at a time, 12 s); "
        "failed here, left to their jobs: bert-torch-fp32 (RuntimeError: exporter crashed)"
    )


def test_a_batch_exports_in_a_child_process_then_its_jobs_find_the_export_cached(
    tmp_path, monkeypatch
):
    """The real thing, on a model whose full-size export takes seconds here: resnet50, and a
    request that fails (weights that are not there), two at a time."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(local, "parallel_exports", lambda requests: 2)
    tasks = [
        local.Task(
            job=Job("r", "model_benchmark.ipynb", {"model": "resnet50-torch-fp32"}),
            run_dir=tmp_path,
            out=tmp_path,
            fingerprint="",
        ),
        local.Task(
            job=Job(
                "b",
                "model_benchmark.ipynb",
                {"model": "bert-torch-fp32", "weights": str(tmp_path / "no-weights")},
            ),
            run_dir=tmp_path,
            out=tmp_path,
            fingerprint="",
        ),
    ]
    done = local.prepare_exports(tasks)
    assert done.made == ("resnet50-torch-fp32",) and done.parallel == 2
    # the child's wall time: an export takes seconds here
    assert 1.0 < done.seconds < local.PREPARE_LIMIT_S
    assert len(done.failed) == 1 and done.failed[0].startswith(
        "bert-torch-fp32 (MissingResource: no weights"
    )
    assert ExportRequest("resnet50-torch-fp32").cached()
    assert prepare.missing_exports([tasks[0].job]) == []


def test_an_interrupt_kills_the_exports_and_reaches_the_batch(tmp_path, monkeypatch):
    """...and leaves nothing behind (issue 51): no export at its final name, no temporary file in
    the cache, no `kit-export-*` folder in $TMPDIR."""
    import tempfile

    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(local, "parallel_exports", lambda requests: 2)
    killed = []

    def interrupted(proc, deadline, should_stop):
        deadline = time.monotonic() + 120
        while not list((tmp_path / "tmp").glob("kit-export-*")) and time.monotonic() < deadline:
            time.sleep(0.1)  # interrupted once the export is under way
        assert list((tmp_path / "tmp").glob("kit-export-*")), "no export started"
        raise KeyboardInterrupt

    monkeypatch.setattr(local, "_wait", interrupted)
    kill = local._kill
    monkeypatch.setattr(local, "_kill", lambda proc: killed.append(proc.pid) or kill(proc))
    task = local.Task(
        job=Job("r", "model_benchmark.ipynb", {"model": "swin-large-torch-fp32"}),
        run_dir=tmp_path,
        out=tmp_path,
        fingerprint="",
    )
    with pytest.raises(KeyboardInterrupt):
        local.prepare_exports([task])
    assert len(killed) == 1
    assert not ExportRequest("swin-large-torch-fp32").cached()
    assert list((tmp_path / "tmp").iterdir()) == []
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_the_batch_records_what_was_made_before_its_jobs(outputs, monkeypatch):
    from kit.batch.runner import run_jobs

    made = prepare.Prepared(("resnet50-torch-fp32",), (), 2, 9.5)
    monkeypatch.setattr(
        local, "prepare_exports", lambda tasks: made if tasks else prepare.Prepared()
    )
    [record] = run_jobs([Job("published_results", "published_results.ipynb", {}, 300)], out=outputs)
    run = json.loads(next(outputs.glob("runs/*/batch.run")).read_text())
    assert record.status == "ok" and run["prepared"] == made.to_dict()


def test_the_plan_says_how_the_exports_will_run_here():
    from kit.batch.time_plan import SideBySide, plan_profile, plan_text

    floors = plan_profile("quick", "cpu", only={"resnet50-torch-fp32_FP16"})
    assert (
        "1 ONNX export (cached after the first run; made 4 at a time before the first job here)"
        in plan_text(floors, "quick", "cpu", SideBySide(4))
    )
    assert "each job exports its own, one after another here" in plan_text(
        floors, "quick", "cpu", SideBySide(1)
    )


def test_an_interrupt_before_the_first_notebook_says_none_was_running(outputs, monkeypatch, capsys):
    import signal

    from kit.batch.interrupts import BatchInterrupted
    from kit.cli.main import main as kit_main

    def interrupted(tasks):
        raise BatchInterrupted(signal.SIGINT)

    monkeypatch.setattr(local, "prepare_exports", interrupted)
    monkeypatch.setattr(
        "kit.cli.reproduce.jobs_for",
        lambda profile, hardware, research=False, search=True: [
            Job("published_results", "published_results.ipynb", {}, 300)
        ],
    )
    assert kit_main(["reproduce", "--hardware", "cpu"]) == 130
    out = capsys.readouterr().out
    assert (
        "interrupted by SIGINT: 0 notebooks ok kept (outputs/runs), no notebook was running;" in out
    )


@pytest.mark.parametrize("study", ["model_benchmark", "c2_study", "server_scenario"])
def test_each_study_exports_what_it_says_it_will_load(study, monkeypatch):
    """What a config's exports() asks the batch to make beforehand is what its run loads: a drift
    would export one model ahead and another in the job."""
    from kit.studies import STUDIES

    module = STUDIES.get(study).module
    loaded = []

    class Stop(Exception):
        pass

    def load_model(name, **kwargs):
        loaded.append(
            ExportRequest(
                name,
                kwargs.get("small", False),
                kwargs.get("weights", "random"),
                kwargs.get("seed", 0),
                kwargs["opset"],
            )
        )
        raise Stop

    monkeypatch.setattr(module, "load_model", load_model)
    params = {
        "small": True,
        "weights": "local",
        **({"seed": 3} if study == "model_benchmark" else {}),
    }
    cfg = STUDIES.get(study).config.from_params(params)
    with pytest.raises(Stop):
        module.execute(cfg, RunResult.new(ResultKind.MODEL_BENCHMARK, study, {}, {}))
    assert loaded == cfg.exports()


def test_a_cache_entry_discarded_while_preparing_is_said_on_the_console(
    tmp_path, monkeypatch, capsys
):
    """Issue 51: the prepare child's stderr is not the console; its CacheRebuilt warning was
    lost."""
    import warnings

    from kit.cache import discard

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    prepare.relay_cache_notes()
    (tmp_path / "m-abc.onnx").write_bytes(b"half")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        discard(tmp_path / "m-abc.onnx", "has no metadata file")
    printed = capsys.readouterr().out
    assert json.loads(printed) == {
        "note": "cache entry m-abc.onnx has no metadata file; rebuilding it"
    }
    made = json.dumps({"model": "resnet50-torch-fp32", "seconds": 1.0, "error": None})
    assert local.prepare_records(f"{printed}{made}\nnoise\n") == [json.loads(made)]
    assert (
        capsys.readouterr().err
        == "warning: cache entry m-abc.onnx has no metadata file; rebuilding it\n"
    )


def test_what_a_killed_export_left_is_removed(tmp_path, monkeypatch):
    """Issue 51: an export killed mid-way left its `kit-export-*` folder in $TMPDIR and its
    temporary file in the cache; the batch removes what the processes it killed left."""
    import tempfile

    from kit.models.export_child import remove_leftovers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    cache = tmp_path / "cache"
    for folder in ("tmp/kit-export-4242-x1", "tmp/kit-export-777-x2", "cache/models"):
        (tmp_path / folder).mkdir(parents=True)
    dead = [
        cache / "models" / ".resnet-abc.4242.tmp.onnx",
        cache / "conversions" / ".r-fp16.4243.tmp.onnx.data",
    ]
    kept = [cache / "models" / ".resnet-abc.777.tmp.onnx", cache / "models" / "resnet-abc.onnx"]
    for path in dead + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    removed = remove_leftovers([4242, 4243], cache)
    assert sorted(removed) == sorted([tmp_path / "tmp" / "kit-export-4242-x1", *dead])
    assert not any(p.exists() for p in removed) and all(p.exists() for p in kept)
    assert (tmp_path / "tmp" / "kit-export-777-x2").is_dir()
