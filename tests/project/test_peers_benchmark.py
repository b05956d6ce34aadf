"""benchmarks/peers.py: rows and batch sizes as asked, the arms per row and CPU, the per-round
ratio's median with a bootstrap interval, and the summary's best peer and verdict (the timed runs
themselves are `make bench-peers`, never a unit test)."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import peers
from kit.backends import Placement
from kit.batch.profiles import search_params
from kit.search import cache
from kit.search.decision import Decision, Plan
from kit.search.gate import numerics_gate


def test_rows_take_the_published_batches_unless_given():
    assert peers.rows("resnet50-torch-fp32:FP16,bert-torch-fp32:FP8@1/4") == [
        ("resnet50-torch-fp32", "FP16", None),
        ("bert-torch-fp32", "FP8", [1, 4]),
    ]
    assert peers.batches_of("resnet50-torch-fp32", "FP16", "published") == [4, 32]
    assert peers.batches_of("resnet50-torch-fp32", "FP16", "max") == [32]
    assert peers.batches_of("resnet50-torch-fp32", "FP16", "published", [2]) == [2]
    assert len(peers.rows("all")) == 14


def test_fp8_rows_add_openvino_int8_and_bf16_needs_the_cpu(monkeypatch):
    monkeypatch.setattr(peers, "cpu_flags", lambda: {"avx512_bf16"})
    assert peers.arms_for("FP8", "")[0] == ["ort-fp32", "ov-f32", "ov-bf16", "ov-int8"]
    assert peers.arms_for("FP16", "")[0] == ["ort-fp32", "ov-f32", "ov-bf16"]
    monkeypatch.setattr(peers, "cpu_flags", lambda: {"avx2"})
    arms, skipped = peers.arms_for("FP16", "")
    assert "ov-bf16" not in arms and "avx512_bf16" in skipped["ov-bf16"]
    assert peers.arms_for("FP16", "ort-fp32")[0] == ["ort-fp32"]


def test_the_ratio_is_the_median_of_rounds_with_a_bootstrap_interval():
    med, low, high = peers.bootstrap_median([0.9, 1.0, 1.1, 1.05, 0.95, 1.2])
    assert med == pytest.approx(1.025) and low <= med <= high and low >= 0.9 and high <= 1.2
    assert peers.bootstrap_median([1.0, 1.0]) == (1.0, None, None)  # too few rounds: no interval


def test_the_summary_names_the_best_peer_and_the_verdict():
    loaded = {a: {"description": {}, "load_s": 1.0} for a in ("kit", "ort-fp32", "ov-f32")}
    per = {
        "kit": [10.0, 11.0, 10.5, 10.0],
        "ort-fp32": [5.0, 5.5, 5.0, 5.2],
        "ov-f32": [11.0, 12.0, 11.5, 11.0],
    }
    s = peers.summarise(4, per, loaded, {}, {"kit": numerics_gate("fp32", 0.01, 1.0)}, [1, 2])
    # median of 10/11, 11/12, 10.5/11.5, 10/11
    assert s["best_peer"] == "ov-f32" and s["kit_over_best"] == pytest.approx(0.9111, abs=1e-3)
    assert not s["met"] and s["kit"]["relative_error"] == 0.01
    assert s["peers"]["ort-fp32"]["kit_over_peer"] > 1.9
    assert "| resnet50 FP16 | 4 |" in peers.table(
        [{"model": "resnet50", "published": "FP16", "kit": {"chosen": "x"}, "batches": [s]}]
    )


def test_a_peer_whose_outputs_fail_the_kits_numerics_gate_is_not_the_best_peer(capsys):
    """A TensorRT launch that failed, or a broken fp16 conversion, is fast: the best peer is the
    fastest whose outputs pass the gate the kit's own candidates pass, and a kit arm that fails it
    meets no target."""
    ref = [np.array([[1.0, -2.0, 3.0]])]
    nan = peers.numerics_verdict([np.array([[np.nan, np.nan, np.nan]])], ref, "fp16")
    assert not nan.ok and nan.extra_nonfinite == 3  # a NaN output is no zero error
    close = peers.numerics_verdict([np.array([[1.01, -2.0, 3.0]])], ref, "fp16")
    assert close.ok and close.relative_error == pytest.approx(0.01 / 3 / 2)
    loaded = {a: {"description": {}, "load_s": 1.0} for a in ("kit", "fast", "sound")}
    per = {"kit": [10.0] * 4, "fast": [40.0] * 4, "sound": [9.0, 9.1, 9.0, 9.1]}
    numerics = {"kit": close, "fast": nan, "sound": close}
    s = peers.summarise(4, per, loaded, {}, numerics, [1.0])
    assert s["best_peer"] == "sound" and s["met"]
    assert s["peers"]["fast"]["numerics_ok"] is False
    assert "NaN/Inf" in s["peers"]["fast"]["numerics_reason"]
    peers.print_batch("m", "FP16", {"chosen": "x"}, s)
    assert "vs fast" in (out := capsys.readouterr().out) and "NUMERICS FAILED: 3 NaN/Inf" in out
    s = peers.summarise(4, per, loaded, {}, {**numerics, "kit": nan}, [1.0])
    assert s["verdict"] == "inconclusive" and not s["met"]
    s = peers.summarise(4, per, loaded, {}, {**numerics, "sound": nan}, [1.0])
    assert "no peer's outputs pass the kit's numerics gate (fast: 3 NaN/Inf" in s["error"]


def summary_of(ratios: list[float]) -> dict:
    """`summarise` of one peer whose per-round kit ÷ peer ratios are `ratios`."""
    loaded = {a: {"description": {}, "load_s": 1.0} for a in ("kit", "ov-f32")}
    per = {"kit": [100.0 * r for r in ratios], "ov-f32": [100.0] * len(ratios)}
    return peers.summarise(4, per, loaded, {}, {}, [1.0])


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([1.01, 1.03], "inconclusive"),  # 2 rounds: median 1.02, no interval
        ([0.9, 1.0, 1.02, 1.04, 1.1], "inconclusive"),  # median 1.02, interval [0.90, 1.10]
        ([0.8, 0.9, 0.93, 1.0, 1.1], "inconclusive"),  # median 0.93, the interval reaches 0.95
        ([1.0, 1.01, 1.02, 1.03], "met"),  # interval [1.00, 1.03]
        ([0.8, 0.81, 0.82, 0.83], "MISSED"),  # interval [0.80, 0.83]
    ],
)
def test_met_needs_the_whole_interval_at_or_above_the_target(ratios, verdict, capsys):
    """2 rounds printed 'kit ÷ best = 1.02 [no CI] (target >= 0.95: met)' and the table said yes:
    the median alone decided. Met only where the interval's low end reaches the target, missed
    where its high end is below it, inconclusive without an interval or where it spans the
    target."""
    s = summary_of(ratios)
    assert s["verdict"] == verdict and s["met"] is (verdict == "met")
    peers.print_batch("resnet50", "FP16", {"chosen": "x"}, s)
    assert f"(target >= 0.95: {verdict};" in capsys.readouterr().out
    row = {"model": "resnet50", "published": "FP16", "kit": {"chosen": "x"}, "batches": [s]}
    assert peers.table([row]).splitlines()[-1].endswith(f"| {verdict} |")


def test_the_index_says_inconclusive_and_an_older_files_median_only_verdict(tmp_path):
    """The index shows the benchmark's verdict and counts only a met one as met; a peers.json
    written before there was a verdict judged the median alone, and the index says so."""
    from bs4 import BeautifulSoup

    from kit.publish.peers_table import PEERS_FILE, peers_section

    older = {**summary_of([1.0, 1.01, 1.02, 1.03]), "met": True}
    del older["verdict"]
    batches = [summary_of([1.01, 1.03]), summary_of([0.8, 0.81, 0.82, 0.83]), older]
    row = {"model": "resnet50", "published": "FP16", "kit": {"chosen": "x"}, "batches": batches}
    (tmp_path / PEERS_FILE).parent.mkdir(parents=True)
    (tmp_path / PEERS_FILE).write_text(json.dumps({"rows": [row], "target": 0.95}))
    soup = BeautifulSoup(peers_section(tmp_path), "html.parser")
    verdicts = [tr.find_all("td")[8].get_text() for tr in soup.find(id="peers").find_all("tr")[1:]]
    assert verdicts == [
        "inconclusive (no interval, or it spans 0.95)",
        "missed (all of the interval below 0.95)",
        "met (median only)",
    ]
    assert "0 of 3 row/batch pairs met 0.95" in soup.get_text()
    assert "1 missed it" in soup.get_text()


def test_the_index_shows_the_peer_table_from_the_benchmarks_json(tmp_path):
    """Issue 28: the peer benchmark's figures reach the report; the index reads them from the JSON
    `make bench-peers` wrote, value for value, and says nothing when there is none."""
    import json

    from bs4 import BeautifulSoup

    from kit.publish.peers_table import PEERS_FILE, peers_section

    assert peers_section(tmp_path) == ""
    loaded = {a: {"description": {}, "load_s": 1.0} for a in ("kit", "ort-fp32", "ov-bf16")}
    per = {
        "kit": [10.0, 11.0, 10.5, 10.0],
        "ort-fp32": [5.0, 5.5, 5.0, 5.2],
        "ov-bf16": [9.0, 10.0, 9.5, 9.0],
    }
    s = peers.summarise(32, per, loaded, {}, {}, [1.0, 1.0])
    data = {
        "rows": [
            {
                "model": "resnet50-torch-fp32",
                "published": "FP16",
                "kit": {"chosen": "openvino bf16 (cpu)"},
                "batches": [s, {"batch_size": 4, "error": "the kit's arm did not load: boom"}],
            }
        ],
        "target": 0.95,
        "rounds": 4,
        "seconds": 5,
        "cpu_flags": ["avx512_bf16"],
        "method": "interleaved",
        "environment": {"cpu": {"model": "AMD EPYC 9B14"}},
    }
    (tmp_path / PEERS_FILE).parent.mkdir(parents=True)
    (tmp_path / PEERS_FILE).write_text(json.dumps(data))
    soup = BeautifulSoup(peers_section(tmp_path), "html.parser")
    cells = [
        [td.get_text() for td in tr.find_all("td")]
        for tr in soup.find(id="peers").find_all("tr")[1:]
    ]
    ratio = s["kit_over_best"]
    assert cells[0][:6] == [
        "resnet50-torch-fp32 FP16",
        "32",
        "openvino bf16 (cpu)",
        "10.2",
        "ov-bf16",
        "9.25",
    ]
    assert cells[0][6].startswith(f"{ratio:.2f} [") and cells[0][8] == "met"
    assert cells[0][7].startswith(f"{s['peers']['ort-fp32']['kit_over_peer']:.2f}")
    assert cells[1][3] == "the kit's arm did not load: boom"
    assert "1 of 2 row/batch pairs" in soup.get_text() and "AMD EPYC 9B14" in soup.get_text()


def test_a_worker_that_dies_is_a_failed_arm_not_a_crash():
    """The OpenVINO int8 peer once died for memory (18 GB at BERT batch 45): the benchmark carries
    on."""
    import multiprocessing as mp

    parent, child = mp.Pipe()
    child.close()
    reply = peers.ask(parent, "round", 1.0)
    assert reply["ok"] is False and "died" in reply["reason"]

    class Dead:
        exitcode = -9

        def join(self, timeout=None):
            pass

    parent, child = mp.Pipe()
    child.close()
    reply = peers.first_reply(Dead(), parent)
    assert reply["ok"] is False and "exit code -9" in reply["reason"]


def test_a_batch_whose_peers_all_fail_to_load_is_an_error_not_a_crash(monkeypatch):
    """print_batch and table formatted kit ÷ best with no best peer (None) and crashed."""

    class Worker:  # a process and its connection, both
        def __init__(self, arm):
            self.arm = arm

        def join(self, timeout=None):
            pass

        def send(self, message):
            pass

        def is_alive(self):
            return False

    def start(arm, model, batch, plan):
        return Worker(arm), Worker(arm)

    def first_reply(proc, conn):
        if conn.arm == "kit":
            return {"ok": True, "description": {}, "load_s": 0.1}
        return {"ok": False, "reason": f"{conn.arm} needs a GPU"}

    monkeypatch.setattr(peers, "start", start)
    monkeypatch.setattr(peers, "first_reply", first_reply)
    monkeypatch.setattr(peers, "ask", lambda conn, *a: {"ok": True})
    args = argparse.Namespace(arms="", hardware="cpu", rounds=2, seconds=0.1)
    b = peers.run_batch("resnet50-torch-fp32", "FP16", 4, {"plan": None, "chosen": "x"}, args)
    assert b["error"].startswith("no peer arm loaded (") and "needs a GPU" in b["error"]
    peers.print_batch("resnet50-torch-fp32", "FP16", {"chosen": "x"}, b)
    row = {"model": "resnet50-torch-fp32", "published": "FP16", "kit": {}, "batches": [b]}
    assert "no peer arm loaded" in peers.table([row])


def test_a_row_the_reports_do_not_have_is_a_clear_error():
    from kit.errors import InvalidParameter

    for bad in (
        "resnet50-torch-fp32",
        "nope:FP16",
        "resnet50-torch-fp32:FP16@0",
        "resnet50-torch-fp32:FP32",
    ):
        with pytest.raises(InvalidParameter, match="--rows"):
            peers.rows(bad)
    assert peers.main(["--rows", "nope:FP16"]) == 2


# --------------------------------------------------------------- the GPU peers, through the doubles


def test_a_gpu_row_gets_plain_pytorch_peers_and_says_why_others_are_skipped(monkeypatch):
    import importlib.util

    import onnxruntime as ort

    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    real_find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorrt" else real_find(name, *a),
    )
    arms, skipped = peers.arms_for("FP16", "", "cuda", "torch")
    assert arms == ["torch-eager-fp16", "torch-cudagraph-fp16", "torch-compile-ro"]
    assert (
        "TensorrtExecutionProvider" in skipped["ort-trt-fp16"]
        and "not installed" in skipped["trt-fp16"]
    )
    arms, skipped = peers.arms_for("FP16", "", "cuda", "tensorflow")
    assert arms == [] and "built in torch" in skipped["torch-eager-fp16"]
    monkeypatch.setattr(
        ort,
        "get_available_providers",
        lambda: ["TensorrtExecutionProvider", "CPUExecutionProvider"],
    )
    assert peers.arms_for("FP16", "", "cuda", "onnx")[0] == ["ort-trt-fp16"]
    assert peers.arms_for("FP16", "", "cpu")[0][0] == "ort-fp32"  # the CPU's arms are as they were


def test_auto_hardware_is_cuda_only_where_a_cuda_backend_loads(monkeypatch):
    monkeypatch.setattr(peers.kinds, "present", lambda: ["cpu", "cuda"])
    assert peers.resolve_hardware("auto") == "cuda" and peers.resolve_hardware("cpu") == "cpu"
    monkeypatch.setattr(peers.kinds, "present", lambda: ["cpu"])
    assert peers.resolve_hardware("auto") == "cpu"


def stored_decisions(
    model: str, precision: str, batches: list[int], kind: str, settle: int | None
) -> dict[int, str]:
    """A cached quick decision at each batch, each choosing another plan, under the keys a quick
    `kit reproduce` job of the row carries, made as it makes them (`settle`: where a near tie was
    settled); returns the label chosen at each."""
    chosen = {}
    for b in batches:
        key = cache.decision_key(model, precision, b, kind)
        plan = {
            "backend": "torch",
            "precision": "fp16",
            "device": kind,
            "options": {"cuda_graph": True, "clients": b},
            "threads": None,
            "precision_note": "n",
        }
        chosen[b] = f"torch fp16 cuda-graph b{b} ({kind})"
        cache.store_decision(
            Decision.from_dict(
                {
                    "plan": plan,
                    "chosen": chosen[b],
                    "today": "t",
                    "key": key,
                    "depth": "quick",
                    "cache_file": cache.decision_path(key).name,
                    "settings": {"settle_batch": settle},
                }
            )
        )
    return chosen


def test_the_kit_arm_takes_the_decision_reproduce_makes_at_each_batch_on_a_gpu(
    outputs, monkeypatch
):
    """A GPU decides at every published batch (no near tie settled at another): the kit's arm at
    batch 32 runs the batch-32 decision, read under the key the reproduce job carries."""
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr(peers, "export_model", lambda name: SimpleNamespace(name=name, small=False))
    chosen = stored_decisions("resnet50-torch-fp32", "FP16", [4, 32], "cuda", None)
    kits = peers.kit_plans("resnet50-torch-fp32", "FP16", "cuda", [4, 32])
    job = search_params("resnet50-torch-fp32", "FP16", [4, 32], "quick", "cuda")
    assert [kits[b]["key"] for b in (4, 32)] == job["search_key"].split(",")
    assert all(k["reused"] for k in kits.values())  # nothing searched again: reproduce's decisions
    assert {b: k["chosen"] for b, k in kits.items()} == chosen
    assert kits[32]["plan"]["options"] == {"cuda_graph": True, "clients": 32}
    assert (kits[32]["decided_at_batch"], kits[32]["settle_batch"]) == (32, None)
    assert peers.kit_plans("resnet50-torch-fp32", "FP16", "cuda", [32])[32]["chosen"] == chosen[32]


def test_on_a_cpu_the_kit_arm_takes_the_one_decision_at_the_quick_batch(outputs, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr(peers, "export_model", lambda name: SimpleNamespace(name=name, small=False))
    job = search_params("resnet50-torch-fp32", "FP16", [4, 32], "quick", "cpu")
    chosen = stored_decisions("resnet50-torch-fp32", "FP16", [job["search_batch"]], "cpu", 32)
    kits = peers.kit_plans("resnet50-torch-fp32", "FP16", "cpu", [4, 32])
    assert kits[4] == kits[32] and kits[32]["key"] == job["search_key"] and kits[32]["reused"]
    assert kits[32]["chosen"] == chosen[job["search_batch"]] and kits[32]["settle_batch"] == 32


@pytest.fixture
def gpu_double(monkeypatch):
    from cuda_double import install, uninstall

    double = install(monkeypatch)
    yield double
    uninstall(double)


@pytest.mark.parametrize("how", ["torch-eager-fp16", "torch-cudagraph-fp16", "torch-compile-ro"])
def test_the_plain_pytorch_peers_run_host_to_host(small, gpu_double, monkeypatch, how):
    import torch

    from benchmarks.peer_gpu_arms import TorchGpuArm
    from kit.backends import BackendConfig, get_backend
    from kit.measure.numerics import NumericDiff

    # what torch.compile returns: the arm must call it, not the eager module
    class Compiled(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module, self.calls = module, 0

        def forward(self, *args):
            self.calls += 1
            return self.module(*args)

    compiled, wrappers = [], []
    monkeypatch.setattr(
        torch,
        "compile",
        lambda module, mode=None: (
            compiled.append(mode) or wrappers.append(Compiled(module)) or wrappers[-1]
        ),
    )
    arm = TorchGpuArm(small, 2, how, device="cpu")
    assert all(h.is_pinned() and h.dtype == torch.float16 for h in arm.host_in)
    ort = get_backend("onnxruntime").load(small, BackendConfig(), 2)
    reference = ort.run(small.make_inputs(2))
    first = arm.outputs()
    assert NumericDiff.between(reference, first).max_abs <= 0.1
    # new inputs in the pinned buffers: every call copies them in
    new = small.make_inputs(2, seed=5)
    for pinned, value in zip(arm.host_in, new.values(), strict=True):
        pinned.copy_(torch.from_numpy(value).to(pinned.dtype))
    again = arm.outputs()
    assert (
        abs(again[0] - first[0]).max() > 1e-3
        and NumericDiff.between(ort.run(new), again).max_abs <= 0.1
    )
    syncs = gpu_double.syncs
    result = arm.round(0.05)
    # one sync per call
    assert result["throughput"] > 0 and gpu_double.syncs - syncs == result["calls"]
    assert gpu_double.captures == (1 if how == "torch-cudagraph-fp16" else 0)
    assert compiled == (["reduce-overhead"] if how == "torch-compile-ro" else [])
    assert [w.calls >= result["calls"] for w in wrappers] == (
        [True] if how == "torch-compile-ro" else []
    )


@pytest.mark.parametrize(("version", "tolerance"), [("10.13.0.35", 1e-5), ("11.4.0.106", 0.05)])
def test_the_plain_tensorrt_peer_runs_host_to_host(
    small, gpu_double, monkeypatch, tmp_path, version, tolerance
):
    """TensorRT 10: the fp32 export with the FP16 flag; 11 (no such flag): the fp16 graph, strongly
    typed."""
    import tensorrt_double

    from benchmarks.peer_gpu_arms import TrtArm
    from kit.backends import BackendConfig, get_backend
    from kit.measure.numerics import NumericDiff

    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    tensorrt_double.install(monkeypatch, version=version)
    arm = TrtArm(small, 2, device="cpu")
    reference = get_backend("onnxruntime").load(small, BackendConfig(), 2).run(small.make_inputs(2))
    assert NumericDiff.between(reference, arm.outputs()).max_abs <= tolerance
    assert arm.round(0.05)["throughput"] > 0
    assert ("strongly typed" in arm.description["how"]) == version.startswith("11")
    arm.context.addresses.clear()  # TensorRT then returns False, runs nothing and raises nothing
    with pytest.raises(RuntimeError, match="execute_async_v3 failed"):
        arm.call()


def test_the_index_says_a_gpu_peer_table_ran_on_the_gpu(tmp_path, monkeypatch):
    """The JSON the benchmark writes says where it ran; the index reads only that JSON."""

    from kit.publish.peers_table import PEERS_FILE, peers_section

    monkeypatch.setattr(peers, "capture", lambda: {"gpus": ["NVIDIA H200"], "cpu": {"model": "x"}})
    (tmp_path / PEERS_FILE).parent.mkdir(parents=True)
    args = argparse.Namespace(hardware="cuda", rounds=2, seconds=1.0)
    peers.write(str(tmp_path / PEERS_FILE), args, [], [])
    assert "GPU NVIDIA H200, every arm timed host to host" in peers_section(tmp_path)
    peers.write(
        str(tmp_path / PEERS_FILE),
        argparse.Namespace(hardware="cpu", rounds=2, seconds=1.0),
        ["avx512f"],
        [],
    )
    assert "CPU x, flags avx512f" in peers_section(tmp_path)


def test_the_index_names_each_batchs_own_choice_on_a_gpu():
    from kit.publish.peers_table import peer_rows

    loaded = {a: {"description": {}, "load_s": 1.0} for a in ("kit", "torch-compile-ro")}
    batches = [
        {
            **peers.summarise(
                b,
                {"kit": [2.0, 2.1, 2.0], "torch-compile-ro": [2.0, 2.0, 2.1]},
                loaded,
                {},
                {},
                [1.0],
            ),
            "kit_decision": {"chosen": f"choice at {b}"},
        }
        for b in (4, 32)
    ]
    rows = peer_rows(
        {
            "rows": [
                {
                    "model": "resnet50",
                    "published": "FP16",
                    "kit": {"chosen": "choice at 4"},
                    "batches": batches,
                }
            ]
        }
    )
    assert [r["kit_choice"] for r in rows] == ["choice at 4", "choice at 32"]
    assert "| choice at 32 |" in peers.table(
        [{"model": "resnet50", "published": "FP16", "kit": {"chosen": "x"}, "batches": batches}]
    )


def test_on_a_gpu_an_extra_batch_never_enters_reproduces_chain_of_published_batches(monkeypatch):
    """A batch given with --batches that no job measures is decided after the published batch
    below it; the published batches keep the chain kit reproduce makes (4, then 32 after 4)."""
    asked = []

    def fake_decide(model, precision, batch, hardware, settings, prior=None):
        asked.append((batch, prior.batch if prior else None))
        plan = Plan(Placement("torch", "fp16", "cuda"))
        return SimpleNamespace(
            batch=batch,
            plan=plan,
            chosen=f"b{batch}",
            today="",
            searched_s=0.0,
            key=None,
            cache_file=None,
        ), False

    monkeypatch.setattr(peers, "export_model", lambda name: SimpleNamespace(name=name, small=False))
    monkeypatch.setattr(peers, "decide", fake_decide)
    kits = peers.kit_plans("resnet50-torch-fp32", "FP16", "cuda", [4, 8, 32])
    assert sorted(asked) == [(4, None), (8, 4), (32, 4)]
    assert {b: k["chosen"] for b, k in kits.items()} == {4: "b4", 8: "b8", 32: "b32"}


def test_the_recorded_flags_are_the_vector_ones_vnni_included():
    assert peers.vector_flags({"avx2", "avx512f", "avx_vnni", "amx_int8"}) == [
        "amx_int8",
        "avx512f",
        "avx_vnni",
    ]
    assert peers.vector_flags({"avx2", "fma"}) == []


def test_a_ctrl_c_keeps_the_rows_written_and_says_so(tmp_path, monkeypatch, capsys):
    out = tmp_path / "peers.json"

    def one_row_then_ctrl_c(asked, args, flags, path, results):
        results.append({"model": "m", "published": "FP16", "batches": []})
        peers.write(path, args, flags, results)
        raise KeyboardInterrupt

    monkeypatch.setattr(peers, "run_rows", one_row_then_ctrl_c)
    rc = peers.main(["--rows", "widedeep-tf-fp32:FP16", "--hardware", "cpu", "--out", str(out)])
    assert rc == 130
    assert "interrupted: 1 finished row(s) kept in" in capsys.readouterr().out
    assert [r["model"] for r in json.loads(out.read_text())["rows"]] == ["m"]


def test_a_gpu_run_s_numerics_reference_is_the_kit_s_kept_one(small, monkeypatch):
    """A GPU bench has no ONNX Runtime fp32 arm: its reference is the kit's (the row's search or
    an earlier run keeps it on disk), read instead of run again, and equal to a fresh run's."""
    from kit.backends import BackendConfig, require_backend
    from kit.backends import reference_outputs as kept

    monkeypatch.setattr(peers, "export_model", lambda name: small)
    backend = type(require_backend("onnxruntime"))
    load, loads = backend.load, []
    monkeypatch.setattr(
        backend, "load", lambda self, *a, **k: loads.append(a[1].precision) or load(self, *a, **k)
    )
    first = peers.reference_outputs(small.name, 2)
    kept.forget()
    again = peers.reference_outputs(small.name, 2)
    assert loads == ["fp32"] and np.array_equal(first[0], again[0])
    session = load(require_backend("onnxruntime"), small, BackendConfig("fp32", "cpu"), 2)
    assert np.array_equal(first[0], session.run(small.make_inputs(2))[0])
    session.close()


def test_out_given_a_folder_writes_peers_json_in_it(tmp_path, monkeypatch):
    def one_row(asked, args, flags, path, results):
        results.append({"model": "m", "published": "FP16", "batches": []})
        peers.write(path, args, flags, results)

    monkeypatch.setattr(peers, "run_rows", one_row)
    rc = peers.main(
        ["--rows", "widedeep-tf-fp32:FP16", "--hardware", "cpu", "--out", str(tmp_path)]
    )
    assert rc == 0
    assert [r["model"] for r in json.loads((tmp_path / "peers.json").read_text())["rows"]] == ["m"]


def test_an_out_that_cannot_be_written_is_refused_before_anything_is_measured(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(peers, "run_rows", lambda *a: pytest.fail("measured before refusing"))
    out = tmp_path / "a-file" / "peers.json"
    assert (
        peers.main(["--rows", "widedeep-tf-fp32:FP16", "--hardware", "cpu", "--out", str(out)]) == 2
    )
    err = capsys.readouterr().err
    assert "--out" in err and str(out) in err and "a folder to write peers.json in" in err
    assert f"cannot make the folder {out.parent}" in err
