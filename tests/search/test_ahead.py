"""kit.search.ahead: the torch.compile candidates a batch's searches will probe, compiled before its
first timed job so each search reads its graph from inductor's caches (issue 50, item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kit.backends import Placement
from kit.batch import local, prepare
from kit.batch.profiles import jobs_for
from kit.batch.time_plan import plan_profile
from kit.hardware import cuda
from kit.measure.memory import GB
from kit.models.requests import ExportRequest
from kit.search import ahead
from kit.search.planning import SearchSettings
from kit.studies.model_benchmark import Config

COMPILED = Placement.of(
    "torch", "fp16", "cuda", {"compile": True, "compile_mode": "reduce-overhead"}
)


@pytest.fixture
def every_export_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(ExportRequest, "cached", lambda self: True)


def test_a_gpu_quick_run_compiles_ahead_each_candidate_its_searches_will_compile(
    every_export_cached,
):
    """One request per torch row and published batch: the 15 compiles `kit reproduce --plan`
    counts (resnet50 FP8 takes its FP16 row's; bert FP8 searches at 45, FP16 at 40)."""
    jobs = jobs_for("quick", "cuda")
    requests = prepare.compile_requests(jobs)
    assert len(requests) == sum(f.compiles for f in plan_profile("quick", "cuda")) == 15
    assert {r.placement for r in requests} == {COMPILED}
    assert {(r.export.model, r.batch) for r in requests} >= {
        ("resnet50-torch-fp32", 4),
        ("resnet50-torch-fp32", 32),
        ("bert-torch-fp32", 40),
        ("bert-torch-fp32", 45),
        ("clip-onnx-fp32", 4),
        ("clip-onnx-fp32", 40),
    }
    assert all(not r.export.small and r.export.weights == "random" for r in requests)
    assert (
        prepare.compile_requests(jobs_for("quick", "cpu")) == []
    )  # no compile in a CPU's quick search
    assert prepare.compile_requests(jobs_for("quick", "cuda", search=False)) == []


def test_a_row_with_a_cached_decision_or_an_uncached_export_compiles_nothing_ahead(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "empty"))
    row = Config.from_params(
        {
            "model": "resnet50-torch-fp32",
            "batch_sizes": [4, 32],
            "search": True,
            "hardware": "cuda",
            "device": "cuda",
        }
    )
    assert [r.batch for r in row.compiles()] == [4, 32]
    monkeypatch.setattr(
        ahead, "decided", lambda export, published, kind, settings, batch: batch == 4
    )
    assert [r.batch for r in row.compiles()] == [32]  # batch 4's search takes its cached decision
    forced = Config.from_params({**row.to_dict(), "search_force": True})
    assert [r.batch for r in forced.compiles()] == [4, 32]
    # the export is not cached here: its job exports it (and says why where that fails) first
    job = jobs_for("quick", "cuda")[1]
    assert prepare.compile_requests([job]) == []
    assert len(prepare.compile_requests([job], exported_only=False)) == 1


def test_a_graph_is_compiled_ahead_once_whatever_its_clients():
    """A config with clients=2 calls the same compiled module: one compile ahead serves both."""
    two = Placement.of(
        "torch", "fp16", "cuda", {"compile": True, "compile_mode": "reduce-overhead", "clients": 2}
    )
    assert ahead.one_graph(two) == COMPILED == ahead.one_graph(COMPILED)
    assert ahead.one_graph(Placement.of("onnxruntime", "fp32", "cpu")).options.to_dict() == {}


def test_only_modes_that_time_nothing_while_compiling_are_compiled_ahead():
    """max-autotune bakes the kernels it timed into the cached graph: compiled side by side, those
    timings would have run against each other on one device."""
    assert ahead.compiles_ahead(COMPILED)
    assert ahead.compiles_ahead(Placement.of("torch", "fp32", "cpu", {"compile": True}))
    assert not ahead.compiles_ahead(
        Placement.of("torch", "fp16", "cuda", {"compile": True, "compile_mode": "max-autotune"})
    )
    assert not ahead.compiles_ahead(Placement.of("torch", "fp16", "cuda", {"cuda_graph": True}))
    assert not ahead.compiles_ahead(Placement.of("onnxruntime", "fp16", "cuda"))


def test_a_request_travels_to_its_child_as_json():
    request = ahead.CompileRequest(
        export=ExportRequest("bert-torch-fp32", seed=3), placement=COMPILED, batch=40
    )
    assert ahead.CompileRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    assert request.label == "bert-torch-fp32 torch fp16 compile=reduce-overhead (cuda) batch 40"


def test_how_many_compile_at_once_follows_the_cores_and_the_largest_model_s_memory():
    def request(model: str) -> ahead.CompileRequest:
        return ahead.CompileRequest(export=ExportRequest(model), placement=COMPILED, batch=4)

    fifteen = [request("resnet50-torch-fp32")] * 12 + [request("swin-large-torch-fp32")] * 3
    assert prepare.parallel_compiles(fifteen, cores=16, available=120 * GB) == 4  # 4 cores each
    assert prepare.parallel_compiles(fifteen, cores=16, available=10 * GB) == 2  # 0.8 x 10 / 4.0 GB
    assert prepare.parallel_compiles(fifteen, cores=2, available=20 * GB) == 0  # this machine
    assert prepare.parallel_compiles(fifteen[:1], cores=16, available=120 * GB) == 1
    assert prepare.parallel_compiles([], cores=16, available=120 * GB) == 0
    # a GPU others already fill: 0.8 x 9 GB free / 4.0 GB (Swin-L's export peak) = 1
    assert prepare.parallel_compiles(fifteen, cores=16, available=120 * GB, device_free=9 * GB) == 1
    assert (
        prepare.parallel_compiles(fifteen, cores=16, available=120 * GB, device_free=139 * GB) == 4
    )


def test_the_gpu_s_free_memory_is_read_for_the_board_cuda_0_is(monkeypatch):
    rows = (
        cuda.GpuRow(0, "00000000:19:00.0", "GPU-aaa", "NVIDIA H200"),
        cuda.GpuRow(1, "00000000:3b:00.0", "GPU-bbb", "NVIDIA H200"),
    )
    monkeypatch.setattr(cuda, "nvidia_smi_gpus", lambda: rows)
    monkeypatch.setattr(cuda.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    smi = "00000000:19:00.0, 143000\n00000000:3B:00.0, 9000\n"

    def run(cmd, **kwargs):
        assert "--query-gpu=pci.bus_id,memory.free" in cmd
        return subprocess.CompletedProcess(cmd, 0, smi, "")

    assert cuda.first_gpu_free_bytes(run) == 9000 * 2**20
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda.first_gpu_free_bytes(run) is None


def test_a_machine_without_the_cores_for_two_compiles_leaves_them_to_the_searches(
    every_export_cached, monkeypatch
):
    monkeypatch.setattr(local, "parallel_compiles", lambda requests, **_: 1)
    started = []
    monkeypatch.setattr(local, "prepare_in_child", lambda *a: started.append(a))
    tasks = [
        local.Task(job=j, run_dir=".", out=".", fingerprint="") for j in jobs_for("quick", "cuda")
    ]
    done = local.prepare_compiles(tasks)
    assert (done.step, done.made, done.failed, started) == ("compiles", (), (), [])


def test_what_the_compiles_made_is_said_and_recorded_apart_from_the_exports():
    records = [
        {"label": "a", "seconds": 30.0, "error": None},
        {"label": "b", "seconds": 2.0, "error": "BackendUnavailable: CUDA backend unavailable"},
    ]
    done = prepare.prepared(records, 4, 61.2, prepare.Step.COMPILES)
    assert done.step.run_key == "compiled_ahead" and prepare.Prepared().step.run_key == "prepared"
    assert done.summary() == (
        "compiled 1 torch.compile candidate(s) side by side before the first job, for the searches "
        "to read from inductor's caches (4 at a time, 61 s); failed here, left to their jobs: "
        "b (BackendUnavailable: CUDA backend unavailable)"
    )


JOB_SIDE = textwrap.dedent(
    """
    import json, sys
    from kit.backends import Placement
    from kit.models import export_model
    from kit.search.candidates import RowCandidate
    from kit.search.planning import SearchSettings
    from kit.search.row import search_row
    from kit.studies import model_benchmark

    placement = Placement.from_plan(json.loads(sys.argv[1]))
    model = export_model("albert-torch-fp32", small=True)
    decision = search_row(model, "FP16", 1, "cpu", SearchSettings("quick"),
                          candidates=[RowCandidate(placement, why="compiled ahead")])
    probe = next(p for p in decision.probes if p.label == placement.label)
    result = model_benchmark.run({"model": "albert-torch-fp32", "small": True, "batch_sizes": [1],
                                  **placement.plan(), "power": False, "accuracy": False,
                                  "roofline": False, "min_duration_s": 0.05, "min_count": 2})
    compile_phase = next(p for p in result.tables.time_account.phases if p.phase == "compile")
    print(json.dumps({"probe": probe.compile_cache, "status": str(probe.status),
                      "run": result.backend.session.items.get("compile_cache"),
                      "detail": compile_phase.detail}))
    """
)


@pytest.mark.slow
def test_a_search_and_its_measurement_read_the_graph_compiled_ahead_from_inductor_s_cache(
    tmp_path, monkeypatch
):
    """The real thing on this CPU: the candidate compiled ahead in the prepare step's child, then a
    search (in another process, as a job) probes it and the row's measurement loads it: both read
    its graph from inductor's FX graph cache instead of compiling it. A CPU's mkldnn weight packing
    keeps its graphs out of that cache (inductor bypasses it), so the CPU runs here without it, as
    a GPU always does."""
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # the kit's own, under KIT_CACHE
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))  # the prepare child inherits them
    monkeypatch.setenv("TORCHINDUCTOR_CPP_WEIGHT_PREPACK", "0")
    env = dict(os.environ)
    placement = Placement.of("torch", "fp32", "cpu", {"compile": True})
    request = ahead.CompileRequest(
        export=ExportRequest("albert-torch-fp32", small=True), placement=placement, batch=1
    )
    done = local.prepare_in_child(prepare.Step.COMPILES, [request.to_dict()], 1)
    assert done.made == (request.label,) and done.failed == ()
    job = subprocess.run(
        [sys.executable, "-c", JOB_SIDE, json.dumps(placement.plan())],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    seen = json.loads(job.stdout.strip().splitlines()[-1])
    assert seen["probe"] == {"hit": 1, "miss": 0, "bypass": 0}, seen
    assert seen["run"] == {"hit": 1, "miss": 0, "bypass": 0}, seen
    assert "torch.compile read its graph from inductor's cache" in seen["detail"]


def test_the_search_settings_that_decide_a_cached_decision_are_the_jobs():
    """`decided` asks the cache as the job's search does: its depth and settle batch."""
    row = Config.from_params(
        {"model": "resnet50-torch-fp32", "batch_sizes": [4, 32], "search": True}
    )
    assert row.search_settings() == SearchSettings("quick", settle_batch=32)
    assert row.search_batches() == [32]
    gpu = Config.from_params({**row.to_dict(), "hardware": "cuda", "device": "cuda"})
    assert gpu.search_settings().settle_batch is None and gpu.search_batches() == [4, 32]


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="a CUDA candidate compiles on a GPU host"
)
def test_a_compile_that_fails_or_runs_too_long_is_left_to_its_search(tmp_path, monkeypatch):
    """A GPU candidate on this CPU: the child says why (the search then fails the probe with the
    same reason); one past the limit is killed with inductor's workers and said so."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    on_gpu = ahead.CompileRequest(
        export=ExportRequest("albert-torch-fp32", small=True), placement=COMPILED, batch=1
    )
    [record] = prepare.compile_all([on_gpu], 1)
    assert record["label"] == on_gpu.label and record["error"].startswith(
        "BackendUnavailable: CUDA backend unavailable"
    )
    monkeypatch.setattr(prepare, "COMPILE_LIMIT_S", 0.5)
    [slow] = prepare.compile_all([on_gpu], 1)
    assert slow["error"] == "its child ended without a record (not done in 0.5 s: killed)"
    assert slow["seconds"] < 30


def test_the_batch_compiles_ahead_after_its_exports_and_records_both(outputs, monkeypatch):
    """The compiles load the exports; both steps go into the run file, each under its own key."""
    from kit.batch import Job
    from kit.batch.runner import run_jobs

    order = []
    exports = prepare.Prepared(("resnet50-torch-fp32",), (), 2, 9.5)
    compiles = prepare.Prepared(("a", "b"), ("c (boom)",), 4, 61.0, prepare.Step.COMPILES)
    monkeypatch.setattr(local, "prepare_exports", lambda tasks: order.append("e") or exports)
    monkeypatch.setattr(local, "prepare_compiles", lambda tasks: order.append("c") or compiles)
    [record] = run_jobs([Job("published_results", "published_results.ipynb", {}, 300)], out=outputs)
    run = json.loads(next(outputs.glob("runs/*/batch.run")).read_text())
    assert order[:2] == ["e", "c"] and record.status == "ok"
    assert run["prepared"] == exports.to_dict() and run["compiled_ahead"] == compiles.to_dict()
