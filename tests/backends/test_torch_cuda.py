"""kit.backends.torch_cuda through tests/cuda_double.py (CUDA graph capture rules enforced on the
CPU): the GPU torch session's host-to-host call, eager on its own stream or captured in one CUDA
graph, with 16-bit weights, pinned buffers in the model's dtype and clients; and the double itself
refusing what CUDA refuses."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch
from cuda_double import CaptureError, install, uninstall

from kit.backends import BackendConfig, get_backend, torch_backend
from kit.backends.torch_cuda import GraphCall, StreamCall, culprit, pinned_host_inputs
from kit.errors import InvalidParameter
from kit.hardware import cuda as kit_cuda
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig


@pytest.fixture
def gpu(monkeypatch):
    """torch sees a GPU (the double); the session's device is the CPU standing for cuda:0."""
    double = install(monkeypatch)
    card = kit_cuda.CudaDevice(0, "00000000:01:00.0", "NVIDIA H200")
    monkeypatch.setattr(torch_backend, "torch_device", lambda config: ("cpu", card))
    yield double
    uninstall(double)


def reference(small, inputs):
    return get_backend("onnxruntime").load(small, BackendConfig(), 2).run(inputs)


def test_a_graph_session_replays_its_capture_on_the_inputs_copied_in(small, gpu):
    a, b = small.make_inputs(2, seed=1), small.make_inputs(2, seed=2)
    session = get_backend("torch").load(
        small, BackendConfig("fp16", "cuda", options={"cuda_graph": True}), 2
    )
    d = session.description
    assert (
        "captured in one CUDA graph" in d["mode"]
        and d["weights_dtype"] == "float16"
        and d["channels_last"]
    )
    assert d["math"] == "fp16"  # the roofline's peak: fp16 tensor cores
    assert gpu.captures == 1  # at load, outside any timed window
    out_a, out_b = session.run(a), session.run(b)
    # the same capture, new inputs copied into its buffers
    assert gpu.captures == 1 and gpu.replays >= 2
    for inputs, out in ((a, out_a), (b, out_b)):
        eager = [
            torch_backend.to_numpy(t) for t in session.device_outputs(session.to_tensors(inputs))
        ]
        # what eager fp16 gives on these inputs
        assert NumericDiff.between(eager, out).max_abs <= 1e-3
        assert NumericDiff.between(reference(small, inputs), out).max_abs <= 0.1
    assert np.abs(out_a[0] - out_b[0]).max() > 1e-3  # the replay computed on b, not on a stale a
    (graph,) = session.calls.values()  # one graph, client 0's, for these shapes
    assert all(h.is_pinned() and h.dtype == torch.float16 for h in graph.host_inputs)
    assert all(h.is_pinned() for h in graph.host_outputs)


def test_each_client_captures_its_own_graph_on_its_own_stream(small, gpu):
    cfg = BackendConfig("fp16", "cuda", options={"cuda_graph": True, "clients": 2})
    session = get_backend("torch").load(small, cfg, 2)
    captured = gpu.captures
    m = session.measure_window(
        small.make_inputs(2), 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3)
    )
    # client 0's was captured at load
    assert gpu.captures == captured + 1 and m.threads == 2 and m.mode == "clients"
    assert (
        m.extra["timing"].startswith("host-to-host")
        and "each its own CUDA stream" in m.extra["clients"]
    )
    calls = session.bind_clients(small.make_inputs(2), 2)
    assert (
        calls[0].stream is not calls[1].stream
        and calls[0].host_inputs[0] is not calls[1].host_inputs[0]
    )


def count_pinned(monkeypatch) -> list:
    """Every pinned allocation (pin_memory) from now on, counted on top of the double's own."""
    made, pin = [], torch.Tensor.pin_memory

    def counting(self, device=None):
        made.append(tuple(self.shape))
        return pin(self, device)

    monkeypatch.setattr(torch.Tensor, "pin_memory", counting)
    return made


@pytest.mark.parametrize("options", [{"cuda_graph": True}, {}], ids=["graph", "eager"])
def test_windows_reuse_each_clients_call_its_graph_and_pinned_buffers(
    small, gpu, monkeypatch, options
):
    """One call per (shapes, client) for the session's life: the second and third windows capture
    nothing and allocate no pinned memory, and still compute on the inputs they are given."""
    session = get_backend("torch").load(
        small, BackendConfig("fp16", "cuda", options={**options, "clients": 2}), 2
    )
    cfg = MeasureConfig(warmup=1, min_duration_s=0, min_count=3)
    session.measure_window(small.make_inputs(2, seed=1), 2, cfg)
    captured, pinned = gpu.captures, count_pinned(monkeypatch)
    for seed in (2, 3):
        session.measure_window(small.make_inputs(2, seed=seed), 2, cfg)
    assert gpu.captures == captured and pinned == []
    assert len(session.calls) == 2  # client 0 and client 1, one input shape
    b = small.make_inputs(2, seed=3)
    eager = [torch_backend.to_numpy(t) for t in session.device_outputs(session.to_tensors(b))]
    last = [o.float().numpy() for o in session.calls[next(iter(session.calls))].host_outputs]
    # the last window ran on seed 3's inputs
    assert NumericDiff.between(eager, last).max_abs <= 1e-3
    session.measure_window(small.make_inputs(4), 4, cfg)  # another shape: its own calls, made once
    assert len(session.calls) == 4 and pinned != []
    session.close()
    assert session.calls == {}  # the graphs and pinned buffers go with the session


def test_run_returns_its_own_arrays_not_the_kept_graphs_buffers(small, gpu):
    """fp32 outputs are not cast on the way out: run() copies them, or the next replay overwrites
    them."""
    a, b = small.make_inputs(2, seed=1), small.make_inputs(2, seed=2)
    session = get_backend("torch").load(
        small, BackendConfig("fp32", "cuda", options={"cuda_graph": True}), 2
    )
    out_a = session.run(a)
    kept = [o.copy() for o in out_a]
    session.run(b)
    assert all(np.array_equal(x, y) for x, y in zip(out_a, kept, strict=True))


def test_the_eager_call_writes_into_pinned_outputs_made_once(small, gpu, monkeypatch):
    session = get_backend("torch").load(small, BackendConfig("fp16", "cuda"), 2)
    call = session.bind(small.make_inputs(2))
    pinned = count_pinned(monkeypatch)
    first, second = call(), call()
    assert pinned == [] and all(
        a is b and a.is_pinned() for a, b in zip(first, second, strict=True)
    )


def test_the_eager_gpu_call_is_host_to_host_on_its_stream(small, gpu):
    session = get_backend("torch").load(small, BackendConfig("fp16", "cuda"), 2)
    inputs = small.make_inputs(2)
    call = session.bind(inputs)
    assert isinstance(call, StreamCall) and all(
        h.is_pinned() and h.dtype == torch.float16 for h in call.host_inputs
    )
    syncs = gpu.syncs
    out = call()
    # the call ends when the copies out land
    assert gpu.syncs == syncs + 1 and out[0].shape == (2, 10)
    assert (
        NumericDiff.between(reference(small, inputs), [o.float().numpy() for o in out]).max_abs
        <= 0.05
    )


def test_a_cnn_on_a_gpu_has_16bit_channels_last_weights(small, gpu):
    """The channels_last the description states is the weights' own layout, not only the inputs'
    (cuDNN picks its NHWC tensor-core kernels from the weights)."""
    session = get_backend("torch").load(small, BackendConfig("fp16", "cuda"), 2)
    convs = [p for p in session.module.parameters() if p.dim() == 4]
    assert convs and session.description["channels_last"]
    assert all(
        p.dtype == torch.float16 and p.is_contiguous(memory_format=torch.channels_last)
        for p in convs
    )
    assert any(not p.is_contiguous() for p in convs)  # a k x k kernel: NHWC is not NCHW's layout


def test_each_eager_client_runs_on_its_own_stream(small, gpu):
    session = get_backend("torch").load(
        small, BackendConfig("fp16", "cuda", options={"clients": 2}), 2
    )
    calls = session.bind_clients(small.make_inputs(2), 2)
    assert all(isinstance(c, StreamCall) for c in calls)
    assert calls[0].stream is not calls[1].stream
    # not the device's shared one
    assert torch.cuda.current_stream() not in (calls[0].stream, calls[1].stream)


def test_the_graph_call_ends_when_its_stream_is_synchronised(small, gpu):
    session = get_backend("torch").load(
        small, BackendConfig("fp16", "cuda", options={"cuda_graph": True}), 2
    )
    call = session.bind(small.make_inputs(2))
    assert isinstance(call, GraphCall)
    syncs, replays = gpu.syncs, gpu.replays
    call()
    assert gpu.replays == replays + 1 and gpu.syncs == syncs + 1  # the copies out are asynchronous


def test_fp32_on_a_gpu_says_whether_tf32_tensor_cores_ran(small, gpu, monkeypatch):
    assert (
        get_backend("torch").load(small, BackendConfig("fp32", "cuda"), 1).description["math"]
        == "tf32"
    )
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert (
        get_backend("torch").load(small, BackendConfig("fp32", "cuda"), 1).description["math"]
        == "fp32"
    )


def test_a_model_a_capture_refuses_is_unavailable_with_the_reason(small, gpu, monkeypatch):
    from kit.errors import BackendUnavailable

    real = torch_backend.TorchSession.device_outputs

    # a forward that reads a device value back (tests/models/test_zoo_capture.py: each rule)
    def syncing(self, tensors):
        tensors[0].sum().item()
        return real(self, tensors)

    monkeypatch.setattr(torch_backend.TorchSession, "device_outputs", syncing)
    with pytest.raises(
        BackendUnavailable,
        match=r"CUDA graph capture failed \(CUDA error: operation not permitted "
        r"when stream is capturing.*test_torch_cuda.py:\d+ syncing: .*run it without cuda_graph",
    ):
        get_backend("torch").load(
            small, BackendConfig("fp16", "cuda", options={"cuda_graph": True}), 1
        )


def test_cuda_graph_is_a_gpu_option_and_not_with_compile(small):
    with pytest.raises(InvalidParameter, match="cuda_graph=True: only on device cuda"):
        get_backend("torch").load(small, BackendConfig(options={"cuda_graph": True}), 1)
    with pytest.raises(InvalidParameter, match="clients=0: an integer >= 1"):
        get_backend("torch").load(small, BackendConfig(options={"clients": 0}), 1)


def test_compile_records_its_seconds(small, monkeypatch):
    # inductor's time is not the point
    monkeypatch.setattr(torch, "compile", lambda module, mode=None, dynamic=None: module)
    d = (
        get_backend("torch")
        .load(small, BackendConfig(options={"compile": True, "compile_mode": "max-autotune"}), 1)
        .description
    )
    assert d["mode"].endswith("mode=max-autotune)") and d["compile_s"] >= 0


@pytest.mark.parametrize(
    ("mode", "calls"), [("reduce-overhead", 2), ("max-autotune", 2), (None, 1)]
)
def test_a_gpu_compile_records_its_cuda_graphs_inside_compile_s(
    small, gpu, monkeypatch, mode, calls
):
    """inductor's CUDA graphs warm up on a compiled module's first call and are recorded on its
    second: both belong to the compile's seconds, not to the first timed window's setup."""
    seen = []

    def counted(module, mode=None, dynamic=None):
        def call(*args):
            seen.append(time.perf_counter())
            return module(*args)

        return call

    monkeypatch.setattr(torch, "compile", counted)
    options = {"compile": True, **({"compile_mode": mode} if mode else {})}
    d = get_backend("torch").load(small, BackendConfig("fp16", "cuda", options=options), 2)
    assert len(seen) == calls and d.description["compile_s"] >= 0


def test_compile_is_static_and_caches_its_kernels_under_the_kits_cache(
    small, gpu, monkeypatch, tmp_path
):
    """Each batch compiles static shapes (no symbolic batch on the second one), inductor's and
    Triton's caches under outputs/cache/ keyed by torch and the device, unless already set."""
    import os

    asked = []
    monkeypatch.setattr(
        torch, "compile", lambda module, mode=None, dynamic=None: asked.append(dynamic) or module
    )
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(var, "restored after the test")
        monkeypatch.delenv(var)
    d = (
        get_backend("torch")
        .load(small, BackendConfig("fp16", "cuda", options={"compile": True}), 2)
        .description
    )
    base = tmp_path / "torch-compile" / f"{torch.__version__}-NVIDIA_H200"
    assert asked == [False] and d["compile_caches"] == {
        "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
        "TRITON_CACHE_DIR": str(base / "triton"),
    }
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(base / "inductor")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/theirs")
    d = (
        get_backend("torch")
        .load(small, BackendConfig("fp16", "cuda", options={"compile": True}), 4)
        .description
    )
    assert d["compile_caches"]["TRITON_CACHE_DIR"] == "/theirs" and asked == [False, False]


def test_the_kits_cache_replaces_the_default_torch_s_own_import_wrote_into_the_environment(
    monkeypatch, tmp_path
):
    """Issue 50: importing torch._dynamo (an export does, so do the kit's cache counters) writes
    inductor's default folder into the environment; the kit kept it, and every compile kept its
    graphs in $TMPDIR/torchinductor_<user> instead of outputs/cache/ (where the compiles ahead and
    the searches meet, and `kit clean-outputs` clears them). A folder the user chose is kept."""
    import subprocess
    import sys

    from kit.backends.compile_cache import compile_caches, torch_default

    written = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, torch._dynamo; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])",
        ],
        env={k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert written == torch_default("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    env = {"TORCHINDUCTOR_CACHE_DIR": written}
    ours = compile_caches("2.13.0", "NVIDIA H200", env)["TORCHINDUCTOR_CACHE_DIR"]
    assert (
        ours
        == str(tmp_path / "torch-compile" / "2.13.0-NVIDIA_H200" / "inductor")
        == env["TORCHINDUCTOR_CACHE_DIR"]
    )
    assert compile_caches("2.13.0", "x", {"TORCHINDUCTOR_CACHE_DIR": "/mine"}) == {
        "TORCHINDUCTOR_CACHE_DIR": "/mine",
        "TRITON_CACHE_DIR": str(tmp_path / "torch-compile" / "2.13.0-x" / "triton"),
    }


# ------------------------------------------------------------- the double refuses what CUDA refuses


def forward(tensors):
    return [tensors[0] * 2 + 1]


def host(values=(1.0, 2.0)):
    return pinned_host_inputs([np.array(values, dtype=np.float32)], None)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (lambda s: torch.cuda.synchronize(), "torch.cuda.synchronize"),
        (lambda s: s[0].sum().item(), "waits for the GPU"),
        (lambda s: s[0].cpu(), ".cpu()"),
        (lambda s: torch.empty(2).pin_memory(), "pinned allocation"),
        (
            lambda s: s[0].copy_(torch.from_numpy(np.ones(2, np.float32)), non_blocking=True),
            "pageable host memory",
        ),
        (
            lambda s: s[0].copy_(
                torch.from_numpy(np.ones(2, np.float32)).half().float(), non_blocking=True
            ),
            "pageable host memory",
        ),  # a host-side cast of pageable memory is still pageable
        (lambda s: torch.cuda.empty_cache(), "empty_cache"),
    ],
)
def test_a_capture_that_breaks_a_cuda_rule_raises(gpu, broken, message):
    def breaking(tensors):
        broken(tensors)
        return forward(tensors)

    with pytest.raises(CaptureError, match=f"not permitted when stream is capturing.*{message}"):
        GraphCall(breaking, host(), "cpu")


def test_a_blocking_copy_in_a_capture_raises(gpu):
    pinned = host()[0]
    graph = torch.cuda.CUDAGraph()
    static, before = torch.empty_like(pinned), torch.cuda.current_stream()
    # as torch.cuda.graph does on a GPU: its exit's capture_end fails on the invalidated capture,
    # that error replaces the body's, and the capture stream stays current
    with pytest.raises(CaptureError, match="previous error during capture") as raised:
        with torch.cuda.graph(graph):
            static.copy_(pinned)
    assert "blocking host<->device copy" in str(raised.value.__context__)
    assert torch.cuda.current_stream() is not before


def test_a_refused_capture_raises_the_models_error_and_leaves_the_capture_stream(gpu):
    before = torch.cuda.current_stream()

    def syncing(tensors):
        tensors[0].sum().item()
        return forward(tensors)

    with pytest.raises(CaptureError, match="not permitted when stream is capturing") as raised:
        GraphCall(syncing, host(), "cpu")
    assert culprit(raised.value).endswith(" syncing")
    assert torch.cuda.current_stream() is before


def test_a_replay_reuses_the_captured_buffers(gpu):
    call = GraphCall(forward, host(), "cpu")
    assert call()[0].tolist() == [3.0, 5.0]
    new = host((10.0, 20.0))
    assert call()[0].tolist() == [3.0, 5.0]  # not loaded: the graph still reads its own buffers
    call.load(new)
    assert call()[0].tolist() == [21.0, 41.0]
    with pytest.raises(RuntimeError, match="before a capture"):
        torch.cuda.CUDAGraph().replay()


def test_a_gpu_search_tries_what_gpu_users_run_and_compiles_in_a_quick_search():
    from kit.search.candidates import row_candidates

    torch_quick = {
        c.label
        for c in row_candidates("torch", "cuda")
        if c.placement.backend == "torch" and c.depth == "quick"
    }
    assert {
        "torch fp16 cuda-graph (cuda)",
        "torch bf16 cuda-graph (cuda)",
        "torch fp16 cuda-graph clients=2 (cuda)",
        "torch fp16 compile=reduce-overhead (cuda)",
        "torch fp16 (cuda)",
        "torch bf16 (cuda)",
        "torch fp32 (cuda)",
    } <= torch_quick
    full = {c.label for c in row_candidates("torch", "cuda") if c.depth == "full"}
    assert "torch fp16 compile=max-autotune (cuda)" in full
    assert not [c for c in row_candidates("onnx", "cuda") if c.placement.backend == "torch"]
    cpu = row_candidates("torch", "cpu", flags={"avx512_bf16"}, cores=2)
    assert not [
        c
        for c in cpu
        if c.placement.options.to_dict().get("cuda_graph")
        or c.placement.options.to_dict().get("clients")
    ]  # the CPU search is as it was


def test_the_report_says_how_the_clients_ran(small, gpu):
    from kit.publish.report.tables import threads_text

    session = get_backend("torch").load(
        small, BackendConfig("fp16", "cuda", options={"clients": 2}), 2
    )
    m = session.measure_window(
        small.make_inputs(2), 2, MeasureConfig(warmup=0, min_duration_s=0, min_count=2)
    )
    assert threads_text(m.to_dict()) == "2 (2 clients: threads, each its own CUDA stream)"
    single = get_backend("torch").load(small, BackendConfig("fp16", "cuda"), 2)
    assert (
        threads_text(
            single.measure_window(
                small.make_inputs(2), 2, MeasureConfig(warmup=0, min_duration_s=0, min_count=2)
            ).to_dict()
        )
        == 1
    )


def test_a_gpu_row_end_to_end_through_the_doubles(small, gpu, monkeypatch, outputs):
    """A model benchmark on 'cuda' (torch fp16, one CUDA graph, 2 clients) through the doubles:
    numerics on the graph's outputs, the figure host to host with its clients, placed on the
    roofline against the fp16 tensor-core peak, the report saying no GPU path ran on a real GPU."""
    from gpu_fakes import Board, FakeHost
    from gpu_fakes import install as install_host

    from kit.publish.report.provenance import provenance
    from kit.publish.report.tables import bytemlperf_table
    from kit.studies import model_benchmark

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))  # the fixture's own export
    install_host(
        monkeypatch, FakeHost([Board(0, "00000000:01:00.0", "NVIDIA H200", 400_000)]), nvml=False
    )
    result = model_benchmark.run(
        {
            "model": small.name,
            "small": True,
            "backend": "torch",
            "precision": "fp16",
            "device": "cuda",
            "options": {"cuda_graph": True, "clients": 2},
            "batch_sizes": [2],
            "min_duration_s": 0,
            "min_count": 3,
            "warmup": 1,
            "accuracy": False,
            "power": False,
            "max_duration_s": 5,
        }
    )
    assert result.status == "ok", result.errors
    (m,) = result.measurements
    assert m.threads == 2 and m.extra["timing"].startswith("host-to-host")
    # run()'s graph is client 0's, kept for every window; client 1 captures its own once
    assert result.numerics[0].max_abs <= 0.1 and gpu.captures == 2
    (row,) = result.tables.to_dict()["roofline"]
    assert (
        row["peak_precision"] == "fp16"
        and row["peak_gflops"] == 989_500.0
        and row["bandwidth_gbs"] == 4800.0
    )
    assert (
        bytemlperf_table(result)["threads"][0] == "2 (2 clients: threads, each its own CUDA stream)"
    )
    assert "none of 7" in provenance(result)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_compile_modes_that_capture_cuda_graphs_take_one_client_on_a_gpu(small, gpu, mode):
    options = {"compile": True, "compile_mode": mode, "clients": 2}
    with pytest.raises(InvalidParameter, match=rf"clients=2: 1 with compile_mode={mode}"):
        get_backend("torch").load(small, BackendConfig("fp16", "cuda", options=options), 2)


def test_no_gpu_candidate_shares_inductors_cuda_graphs_between_clients():
    from kit.backends.torch_backend import CUDA_GRAPH_COMPILE_MODES
    from kit.search.candidates import row_candidates

    graph_compiles = [
        c
        for c in row_candidates("torch", "cuda")
        if getattr(c.placement.options, "compile_mode", None) in CUDA_GRAPH_COMPILE_MODES
    ]
    assert graph_compiles
    assert all((c.placement.options.clients or 1) == 1 for c in graph_compiles)


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_the_device_resident_figure_runs_the_session_s_way_and_waits_for_its_own_stream(
    small, gpu, monkeypatch, cuda_graph
):
    """A cuda_graph session's device-resident figure replays a graph of the model (it timed the
    eager forward), and each client waits for its own stream, not for every client's work."""
    from kit.measure.window import MeasureConfig

    options = {"cuda_graph": True} if cuda_graph else {}
    session = get_backend("torch").load(small, BackendConfig("fp16", "cuda", options=options), 2)
    captures, replays = gpu.captures, gpu.replays
    device_syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: device_syncs.append(device))
    m = session.measure_device_resident(
        small.make_inputs(2), 2, MeasureConfig(warmup=0, min_duration_s=0, min_count=3)
    )
    assert m.extra["timing"].startswith("device-resident") and not device_syncs
    assert gpu.captures - captures == int(cuda_graph)
    assert gpu.replays - replays == (m.latency.count if cuda_graph else 0)


def test_a_gpu_session_lets_cudnn_pick_its_fastest_algorithms_for_its_one_shape(
    small, gpu, monkeypatch
):
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    session = get_backend("torch").load(small, BackendConfig("fp16", "cuda"), 2)
    assert torch.backends.cudnn.benchmark and session.description["cudnn_benchmark"]
