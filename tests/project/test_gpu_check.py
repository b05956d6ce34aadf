"""benchmarks/gpu_check.py on the CPU: its plan, its budget, its summary and its exit codes, with a
fake subprocess runner and a fake clock (the real runner is checked on tiny commands)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_check, peers
from benchmarks.gpu_check_report import Facts
from benchmarks.gpu_check_runner import Completed, run_process
from kit.backends import Placement
from kit.search.probe import Probe

ROWS = [
    "resnet50-torch-fp32:FP16",
    "bert-torch-fp32:FP16",
    "clip-onnx-fp32:FP16",
    "albert-torch-fp32:FP16",
]
FACTS = Facts("NVIDIA H200", "580.159.04", "13.0", "2.11.0+cu130", "13.0", 91000, "3.12.3", 16)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeRunner:
    """Each check takes `seconds[kind]` on the fake clock (cut at its limit); a peers check writes a
    peers JSON whose kit ÷ peer ratio is `ratio`."""

    def __init__(self, clock: Clock, seconds: dict, ratio: float = 1.05, returncode: int = 0):
        self.clock, self.seconds, self.ratio, self.returncode = clock, seconds, ratio, returncode
        self.calls: list[dict] = []

    def __call__(self, argv, env, limit, log, full) -> Completed:
        kind = "peers" if "benchmarks.peers" in argv else "reproduce"
        took = (
            self.seconds[kind]
            if kind == "peers"
            else self.seconds[f"reproduce{len(self.reproduces())}"]
        )
        self.calls.append(
            {"argv": argv, "outputs": env["KIT_OUTPUTS"], "limit": limit, "kind": kind}
        )
        if took > limit:
            self.clock.now += limit
            return Completed(-2, limit, timed_out=True)
        self.clock.now += took
        if kind == "peers":
            write_peers(
                Path(argv[argv.index("--out") + 1]), argv[argv.index("--rows") + 1], self.ratio
            )
        else:
            write_state(Path(env["KIT_OUTPUTS"]), took, self.returncode)
        return Completed(self.returncode, took)

    def reproduces(self) -> list[dict]:
        return [c for c in self.calls if c["kind"] == "reproduce"]


def write_peers(path: Path, row: str, ratio: float | tuple[float, float]) -> None:
    """What benchmarks.peers writes for one row at batches 4 and 32 (its own `summarise`); `ratio`
    kit ÷ peer at both, or at each."""
    model, precision = row.split(":")
    batches = []
    ratios = ratio if isinstance(ratio, tuple) else (ratio, ratio)
    for batch, r in zip((4, 32), ratios, strict=True):
        per = {
            "kit": [1000.0 * r, 1010.0 * r, 990.0 * r],
            "torch-compile-ro": [1000.0, 1005.0, 995.0],
        }
        loaded = {arm: {"description": {}, "load_s": 1.0} for arm in per}
        batches.append(peers.summarise(batch, per, loaded, {}, {}, [1.0]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "rows": [
                    {
                        "model": model,
                        "published": precision,
                        "batches": batches,
                        "kit": {"chosen": "torch fp16 compile=reduce-overhead (cuda)"},
                    }
                ]
            }
        )
    )


def write_state(outputs: Path, took: float, returncode: int) -> None:
    """What a reproduce leaves in outputs/state.json: three jobs, one failed where it exited 1."""
    jobs = {
        "resnet50-torch-fp32_FP16": {
            "name": "resnet50-torch-fp32_FP16",
            "status": "ok",
            "duration_s": took / 2,
        },
        "clip-onnx-fp32_FP16": {
            "name": "clip-onnx-fp32_FP16",
            "status": "ok" if returncode == 0 else "failed",
            "duration_s": took / 4,
            "message": "CUDA out of memory",
        },
        "summary": {"name": "summary", "status": "ok", "duration_s": 1.0},
    }
    (outputs / "state.json").write_text(json.dumps({"jobs": jobs, "runs": []}))


def args(tmp_path: Path, budget: float, *extra: str):
    return gpu_check.parse(
        [
            "--budget-s",
            str(budget),
            "--out",
            str(tmp_path / "out"),
            "--work",
            str(tmp_path / "work"),
            *extra,
        ]
    )


def check(tmp_path, budget, runner, clock, rows=ROWS, *extra) -> tuple[int, str]:
    code = gpu_check.check_gpu(
        args(tmp_path, budget, *extra),
        runner=runner,
        gaps=lambda hardware: [],
        facts=lambda: FACTS,
        rows=lambda: list(rows),
        clock=clock,
    )
    return code, (tmp_path / "out" / "summary.txt").read_text()


def test_the_most_telling_checks_run_first_and_the_budget_skips_the_rest(tmp_path):
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60, "reproduce0": 100, "reproduce1": 50})
    code, summary = check(tmp_path, 450, runner, clock)
    assert [c["kind"] for c in runner.calls] == [
        "peers",
        "peers",
        "reproduce",
        "reproduce",
        "peers",
    ]
    assert (
        "resnet50-torch-fp32:FP16" in runner.calls[0]["argv"]
        and "bert-torch-fp32:FP16" in runner.calls[1]["argv"]
    )
    # each subprocess bounded by what is left of the budget, less the reserve for the summary and
    # the 20 s stopping it at its limit may take (SIGINT, 15 s, SIGKILL, 5 s)
    assert [c["limit"] for c in runner.calls] == [425, 365, 305, 205, 155]
    lines = summary.splitlines()
    assert lines[0] == "gpu_check: exit 0 (5 met, 0 not met, 1 skipped; 330 of 450 s used)"
    assert lines[1].startswith(
        "card: NVIDIA H200; driver 580.159.04 (CUDA 13.0); torch 2.11.0+cu130"
    )
    assert "reproduce-cold: met (100 s, exit 0) [target: every job ok in <= 600 s]" in lines
    assert "reproduce-warm: met (50 s, exit 0) [target: every job ok in <= 180 s]" in lines
    assert (
        "peers clip-onnx-fp32:FP16: met (2 batch(es), 60 s) [target: kit ÷ best plain-PyTorch peer "
        ">= 0.95]" in lines
    )
    assert (
        "peers albert-torch-fp32:FP16: skipped (budget: 115 s left, it needs >= 120 s) "
        "[target: kit ÷ best plain-PyTorch peer >= 0.95]"
    ) in lines
    assert code == 0


def test_each_peer_batch_is_a_summary_line_with_its_interval_and_a_miss_fails(tmp_path):
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60, "reproduce0": 100, "reproduce1": 50}, ratio=0.8)
    code, summary = check(tmp_path, 200, runner, clock, ROWS[:1], "--checks", "peers")
    assert code == 1 and "gpu_check: exit 1 (0 met, 1 not met, 0 skipped" in summary
    assert "peers resnet50-torch-fp32:FP16: MISSED (2 batch(es), 60 s)" in summary
    assert (
        "    b4: kit 800/s (torch fp16 compile=reduce-overhead (cuda)) ÷ best peer "
        "torch-compile-ro 1000/s = 0.80 [0.80, 0.80] (target >= 0.95: MISSED)"
    ) in summary
    assert "    b32: kit 800/s" in summary
    stored = json.loads((tmp_path / "out" / "peers.json").read_text())
    assert [r["model"] for r in stored["rows"]] == ["resnet50-torch-fp32"]
    assert (
        json.loads((tmp_path / "out" / "checks.json").read_text())["checks"][0]["verdict"]
        == "MISSED"
    )
    clock = Clock()
    # one batch of the row short is a miss
    runner = FakeRunner(clock, {"peers": 60}, ratio=(1.05, 0.8))
    code, summary = check(tmp_path, 200, runner, clock, ROWS[:1], "--checks", "peers")
    assert code == 1 and "(target >= 0.95: met)" in summary and "MISSED (2 batch(es)" in summary


def test_a_peer_batch_whose_interval_spans_the_target_is_inconclusive_and_not_met(tmp_path):
    """kit ÷ peer 0.95 at the median, its interval [0.945, 0.955]: the median alone said met;
    the interval cannot tell, so the batch and the check are inconclusive and gpu_check exits 1."""
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60}, ratio=0.95)
    code, summary = check(tmp_path, 200, runner, clock, ROWS[:1], "--checks", "peers")
    assert code == 1 and "gpu_check: exit 1 (0 met, 1 not met, 0 skipped" in summary
    assert "peers resnet50-torch-fp32:FP16: inconclusive (2 batch(es), 60 s)" in summary
    assert "= 0.95 [0.95, 0.95] (target >= 0.95: inconclusive)" in summary
    checks = json.loads((tmp_path / "out" / "checks.json").read_text())["checks"]
    assert checks[0]["verdict"] == "inconclusive"


@pytest.mark.parametrize(
    ("batches", "verdict"),
    [
        (["met", "met"], "met"),
        (["met", "inconclusive"], "inconclusive"),
        (["inconclusive", "MISSED"], "MISSED"),
        ([], "MISSED"),
    ],
)
def test_a_peer_check_is_met_only_where_every_batch_met(batches, verdict):
    from benchmarks.gpu_check_report import peers_verdict

    assert peers_verdict(batches) == verdict


def test_a_cold_reproduce_the_budget_cuts_short_fails_and_no_warm_rerun_follows(tmp_path):
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60, "reproduce0": 500, "reproduce1": 50})
    code, summary = check(tmp_path, 400, runner, clock, ROWS[:2])
    assert code == 1 and [c["kind"] for c in runner.calls] == ["peers", "peers", "reproduce"]
    assert "reproduce-cold: cut short (stopped by the budget after 255 s (limit 255 s))" in summary
    assert (
        "reproduce-warm: skipped (the cold reproduce did not complete: nothing to rerun warm)"
        in summary
    )


def test_a_reproduce_over_its_target_or_with_a_failed_job_is_missed(tmp_path):
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60, "reproduce0": 650, "reproduce1": 200})
    code, summary = check(
        tmp_path, 2000, runner, clock, [], "--checks", "reproduce-cold,reproduce-warm"
    )
    assert code == 1
    assert (
        "reproduce-cold: MISSED (650 s, exit 0)" in summary
        and "reproduce-warm: MISSED (200 s, exit 0)" in summary
    )
    assert (
        "    3 of 3 jobs ok; slowest: resnet50-torch-fp32_FP16 325 s, clip-onnx-fp32_FP16 162 s, "
        "summary 1 s" in summary.splitlines()
        # where a cold run's time went, read before the warm rerun clears it
    )
    clock = Clock()
    runner = FakeRunner(clock, {"reproduce0": 100}, returncode=1)
    code, summary = check(tmp_path, 2000, runner, clock, [], "--checks", "reproduce-cold")
    assert code == 1 and "reproduce-cold: MISSED (100 s, exit 1 (a job not ok: see log))" in summary
    assert "    clip-onnx-fp32_FP16: failed (CUDA out of memory)" in summary.splitlines()


def test_cold_and_warm_share_one_outputs_folder_the_first_peers_another(tmp_path):
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 10, "reproduce0": 10, "reproduce1": 10})
    outputs = tmp_path / "work" / "outputs"
    (outputs / "cache" / "search").mkdir(parents=True)
    (outputs / "cache" / "search" / "kept.json").write_text("{}")
    (outputs / "runs").mkdir()
    assert check(tmp_path, 1000, runner, clock, ROWS[:3])[0] == 0
    where = [(c["kind"], Path(c["outputs"]).name) for c in runner.calls]
    assert where == [
        ("peers", "outputs-peers"),
        ("peers", "outputs-peers"),
        ("reproduce", "outputs"),
        # the later rows reuse reproduce's decisions
        ("reproduce", "outputs"),
        ("peers", "outputs"),
    ]
    # the cold run started from nothing
    assert not (outputs / "cache" / "search" / "kept.json").exists()
    assert "--hardware" in runner.calls[2]["argv"] and runner.calls[2]["argv"][:3] == [
        sys.executable,
        "-m",
        "kit.cli.main",
    ]


def test_a_warm_rerun_keeps_only_the_cache(tmp_path):
    outputs = tmp_path / "outputs"
    for part in ("cache/search/d.json", "runs/r/result.json", "state.json"):
        (outputs / part).parent.mkdir(parents=True, exist_ok=True)
        (outputs / part).write_text("{}")
    warm = gpu_check.reproduce_check("reproduce-warm", args(tmp_path, 10), outputs, 180)
    gpu_check.prepare(warm)
    assert (
        sorted(p.name for p in outputs.iterdir()) == ["cache"]
        and (outputs / "cache/search/d.json").exists()
    )
    gpu_check.prepare(gpu_check.reproduce_check("reproduce-cold", args(tmp_path, 10), outputs, 600))
    assert list(outputs.iterdir()) == []


def test_without_cuda_it_exits_2_naming_what_is_missing_and_runs_nothing(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "cuda", None)
    gaps = gpu_check.missing()
    assert gaps[0] == f"a CUDA build of torch (torch {torch.__version__} is a CPU build)"
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.missing()[0].startswith("a usable NVIDIA GPU (torch ")
    assert gpu_check.missing("cpu") == []  # a dry run needs no GPU
    runner = FakeRunner(Clock(), {})
    code = gpu_check.check_gpu(
        args(tmp_path, 100), runner=runner, facts=lambda: FACTS, rows=lambda: ROWS
    )
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert code == 2 and runner.calls == []
    assert summary.splitlines()[:2] == [
        "gpu_check: exit 2 (0 met, 0 not met, 0 skipped; 0 of 100 s used)",
        "missing: a usable NVIDIA GPU (torch "
        + torch.__version__
        + ", built for CUDA 13.0, sees none: no device, or no driver)",
    ]


def test_nothing_run_is_not_a_pass_and_an_interrupt_keeps_what_finished(tmp_path):
    clock = Clock()
    code, summary = check(tmp_path, 20, FakeRunner(clock, {}), clock, ROWS[:1])
    assert code == 1 and "gpu_check: exit 1 (0 met, 0 not met, 3 skipped" in summary

    class Interrupted(FakeRunner):
        def __call__(self, argv, env, limit, log, full):
            if "reproduce" in argv:
                raise KeyboardInterrupt
            return super().__call__(argv, env, limit, log, full)

    clock = Clock()
    code, summary = check(tmp_path, 1000, Interrupted(clock, {"peers": 10}), clock, ROWS[:3])
    assert code == 1 and "peers resnet50-torch-fp32:FP16: met" in summary
    assert "reproduce-cold: cut short (interrupted (SIGINT): the caller's time limit)" in summary
    assert "clip" not in summary  # nothing after the interrupt


def test_every_torch_row_is_checked_resnet50_and_bert_first():
    rows = gpu_check.torch_rows()
    assert rows[:2] == ["resnet50-torch-fp32:FP16", "bert-torch-fp32:FP16"] and len(rows) == 12
    # TensorFlow models: no torch peer
    assert not any(r.startswith(("roformer", "widedeep")) for r in rows)


def test_the_real_runner_bounds_the_child_and_logs_its_tail(tmp_path):
    log, full = tmp_path / "out" / "log.txt", tmp_path / "work" / "full.txt"
    done = run_process([sys.executable, "-c", "print('hello')"], {}, 30, log, full)
    assert done.returncode == 0 and not done.timed_out and "hello" in log.read_text()
    done = run_process(
        [sys.executable, "-c", "import time; print('slow', flush=True); time.sleep(30)"],
        {},
        1.0,
        log,
        full,
    )
    assert done.timed_out and done.seconds < 20 and "slow" in full.read_text()


def test_a_caller_that_cannot_add_arguments_narrows_it_through_the_environment(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("GPU_CHECK_CHECKS", "reproduce-cold,reproduce-warm")
    monkeypatch.setenv("GPU_CHECK_ONLY", "resnet50")
    clock = Clock()
    runner = FakeRunner(clock, {"reproduce0": 100, "reproduce1": 50})
    assert check(tmp_path, 1000, runner, clock)[0] == 0
    assert [c["argv"][-2:] for c in runner.calls] == [["--only", "resnet50"]] * 2


def test_a_dry_run_through_the_environment_runs_every_check_on_the_cpu(tmp_path, monkeypatch):
    """../shared/gpu's step G takes no arguments: GPU_CHECK_HARDWARE=cpu makes it a dry run here."""
    monkeypatch.setenv("GPU_CHECK_HARDWARE", "cpu")
    clock = Clock()
    runner = FakeRunner(clock, {"peers": 60, "reproduce0": 100, "reproduce1": 50})
    code, summary = check(tmp_path, 1000, runner, clock)
    hardware = [c["argv"][c["argv"].index("--hardware") + 1] for c in runner.calls]
    assert runner.calls and set(hardware) == {"cpu"}
    assert "dry run" in summary.lower()


def test_a_wrong_hardware_from_the_environment_is_refused_by_name(monkeypatch, capsys):
    monkeypatch.setenv("GPU_CHECK_HARDWARE", "gpu")
    with pytest.raises(SystemExit):
        gpu_check.parse(["--budget-s", "10", "--out", "/tmp/x"])
    assert "GPU_CHECK_HARDWARE='gpu'" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--budget-s", "--out"])
def test_budget_and_out_are_required(flag, capsys):
    argv = {"--budget-s": "10", "--out": "/tmp/x"}
    with pytest.raises(SystemExit):
        gpu_check.parse([a for k, v in argv.items() if k != flag for a in (k, v)])


def test_the_summary_says_where_a_reproduces_seconds_went_inside_and_outside_the_studies(
    tmp_path,
):
    """What kit.batch.time_plan.GUESSES guesses, measured where the check runs: each job's seconds
    outside its study (own kernel, the warm kernel's first job, its later ones) and the studies'
    phases."""
    from benchmarks.gpu_check_report import job_lines
    from kit.batch.local import WARM_NOTE

    outputs = tmp_path / "outputs"
    (outputs / "runs").mkdir(parents=True)

    def job(name, duration, total, phases, note=""):
        result = outputs / "runs" / f"{name}.json"
        account = {"total_s": total, "phases": [{"phase": p, "seconds": s} for p, s in phases]}
        result.write_text(json.dumps({"tables": {"time_account": account}}))
        return name, {
            "name": name,
            "status": "ok",
            "duration_s": duration,
            "note": note,
            "results": f"runs/{name}.json",
        }

    jobs = dict(
        [
            job("a", 40.0, 24.0, [("compile", 20.0), ("timing", 4.0)], WARM_NOTE.format(1)),
            job("b", 35.0, 30.0, [("compile", 25.0), ("timing", 5.0)], WARM_NOTE.format(2)),
            job("c", 27.0, 20.0, [("compile", 19.0), ("timing", 1.0)], WARM_NOTE.format(3)),
            job("c2", 80.0, 64.0, [("timing", 64.0)]),
        ]
    )
    jobs["summary"] = {"name": "summary", "status": "ok", "duration_s": 3.0}  # no result read
    (outputs / "state.json").write_text(json.dumps({"jobs": jobs, "runs": []}))
    lines = job_lines(outputs)
    assert lines[-2] == (
        "seconds in the studies 138; outside them (a job's kernel, imports, report): "
        "own 1 x 16.0 s + warm first 1 x 16.0 s + warm 2 x 6.0 s"
    )
    assert lines[-1] == "studies' phases: timing 74 s (4), compile 64 s (3)"


def test_the_summary_says_what_was_compiled_ahead_and_which_compiles_read_their_graph(tmp_path):
    """Issue 50: the compiles ahead (the batch's run file) and the searches' compiles that read
    their graph from inductor's cache (their decisions): what GUESSES' compile_s and
    cached_compile stand for, measured where the check runs."""
    from benchmarks.gpu_check_report import compile_lines, prepare_lines

    outputs = tmp_path / "outputs"
    (outputs / "runs" / "r1").mkdir(parents=True)
    (outputs / "cache" / "search").mkdir(parents=True)
    assert prepare_lines(outputs) == [] and compile_lines(outputs) == []
    (outputs / "runs" / "r1" / "batch.run").write_text(
        json.dumps(
            {
                "prepared": {"made": ["a", "b"], "failed": [], "parallel": 2, "seconds": 9.6},
                "compiled_ahead": {
                    "made": ["x"] * 14,
                    "failed": ["y (boom)"],
                    "parallel": 4,
                    "seconds": 131.2,
                },
            }
        )
    )
    assert prepare_lines(outputs) == [
        "before the first job: exports 2 (2 at a time, 10 s; 0 failed); torch.compile candidates "
        "compiled ahead 14 (4 at a time, 131 s; 1 failed)"
    ]
    hit, miss = {"hit": 1, "miss": 0, "bypass": 0}, {"hit": 0, "miss": 1, "bypass": 0}
    graphs = Placement.of(
        "torch", "fp16", "cuda", {"compile": True, "compile_mode": "reduce-overhead"}
    )
    engine = Placement.of("onnxruntime", "fp16", "tensorrt")

    def probe(placement: Placement, **figures) -> dict:
        return Probe(label=placement.label, placement=placement, native=True, why="").to_dict() | (
            figures
        )

    probes = [
        probe(graphs, compile_s=6.0, compile_cache=hit),
        probe(graphs, compile_s=8.0, compile_cache=hit),
        probe(graphs, compile_s=31.0, compile_cache=miss),
        probe(Placement.of("torch", "fp16", "cuda"), compile_s=None),
        # the sibling's, counted where it was measured
        probe(graphs, compile_s=6.0, compile_cache=hit, shared_from="the FP16 row's search (d, t)"),
        probe(engine, compile_s=64.0, engine_reused=False),
        probe(engine, compile_s=2.0, engine_reused=True),
        probe(engine, compile_s=56.0, engine_reused=False),
        probe(engine, compile_s=30.0),  # an older kit's: neither built nor read, as far as it says
    ]
    malformed = [None, "x", probe(engine, compile_s="abc", engine_reused=False)]
    (outputs / "cache" / "search" / "d.json").write_text(json.dumps({"probes": probes + malformed}))
    (outputs / "cache" / "search" / "broken.json").write_text("{")
    assert compile_lines(outputs) == [
        "searches' torch.compile probes: 3; compiled there 1 (31.0 s each); read from inductor's "
        "cache 2 (7.0 s each)",
        "searches' TensorRT probes: 4; engines built there 2 (60.0 s each); read from the engine "
        "cache 1 (2.0 s each)",
    ]
