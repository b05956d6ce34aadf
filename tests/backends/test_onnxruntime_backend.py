"""kit.backends.onnxruntime_backend: every precision loads and runs; absent devices say so; on a GPU
host (faked: ORT sessions that report their providers) no fallback passes as the device asked
for."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from gpu_fakes import FakeHost, four_boards, install

from kit.backends import BackendConfig, get_backend
from kit.backends import onnxruntime_backend as ort_backend
from kit.backends.onnxruntime_backend import OrtSession, placement_from_profile, provider_options
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware.environment import onnxruntime_version
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig

BOUNDS = {"fp32": 0.0, "fp16": 1e-2, "int8": 0.2}  # max |diff| on softmax outputs in [0, 1]


@pytest.fixture(autouse=True)
def cache_env(small, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))


@pytest.fixture(scope="module")
def reference(small):
    return get_backend("onnxruntime").load(small, BackendConfig(), 4).run(small.make_inputs(4))


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_precision_runs_close_to_fp32(small, reference, precision):
    session = get_backend("onnxruntime").load(
        small, BackendConfig(precision=precision, threads=1), 4
    )
    out = session.run(small.make_inputs(4))
    assert out[0].shape == (4, 10)
    diff = NumericDiff.between(reference, out)
    assert diff.max_abs <= BOUNDS[precision] and diff.nan_count == 0
    if precision != "fp32":
        assert diff.max_abs > 0 and "conversion" in session.description
    assert session.description["precision"] == precision and session.description["threads"] == 1


def test_bind_and_measure(small):
    session = get_backend("onnxruntime").load(small, BackendConfig(precision="int8"), 2)
    m = session.measure(
        small.make_inputs(2), 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3)
    )
    assert m.latency.count == 3 and m.throughput > 0


def test_quantization_option_picks_the_int8_method_and_only_for_int8(small):
    backend = get_backend("onnxruntime")
    session = backend.load(
        small, BackendConfig(precision="int8", options={"quantization": "dynamic"}), 1
    )
    assert session.description["conversion"].startswith("onnxruntime dynamic int8")
    assert (
        "static QDQ"
        in backend.load(small, BackendConfig(precision="int8"), 1).description["conversion"]
    )
    with pytest.raises(InvalidParameter, match="quantization='dynamic': only with precision int8"):
        backend.load(small, BackendConfig(precision="fp16", options={"quantization": "dynamic"}), 1)


@pytest.mark.parametrize(("precision", "hint"), [("bf16", "torch"), ("fp8", "int8")])
def test_unsupported_precision_says_what_to_use(small, precision, hint):
    with pytest.raises(InvalidParameter, match=hint):
        get_backend("onnxruntime").load(small, BackendConfig(precision=precision), 1)


def test_unknown_precision_names_allowed():
    with pytest.raises(InvalidParameter, match="one of fp32, bf16, fp16, int8, fp8"):
        BackendConfig(precision="fp64")


@pytest.mark.parametrize("device", ["cuda", "tensorrt"])
def test_absent_gpu_provider_is_a_clear_message(small, device):
    wanted = "CUDAExecutionProvider" if device == "cuda" else "TensorrtExecutionProvider"
    if wanted in ort.get_available_providers():
        pytest.skip(f"{wanted} is present here")
    with pytest.raises(
        BackendUnavailable, match=f"{device.upper()} backend unavailable.*onnxruntime-gpu"
    ):
        get_backend("onnxruntime").load(small, BackendConfig(device=device), 1)


def test_unknown_device(small):
    with pytest.raises(BackendUnavailable, match="no device 'ipu'"):
        get_backend("onnxruntime").load(small, BackendConfig(device="ipu"), 1)


def test_provider_list_with_options_when_present():
    backend = get_backend("onnxruntime")
    cfg = BackendConfig(
        precision="fp16",
        device="tensorrt",
        options={"provider_options": {"TensorrtExecutionProvider": {"trt_max_workspace_size": 1}}},
    )
    providers = backend.providers(
        cfg, ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    trt_name, trt_opts = providers[0]
    assert trt_name == "TensorrtExecutionProvider" and trt_opts["trt_fp16_enable"] is True
    assert trt_opts["trt_max_workspace_size"] == 1 and providers[-1] == "CPUExecutionProvider"
    assert (
        provider_options(BackendConfig())["TensorrtExecutionProvider"]["trt_fp16_enable"] is False
    )


# --------------------------------------------------------------- GPU paths, with a fake ORT session

RealSession = ort.InferenceSession
EPFail = ort.capi.onnxruntime_pybind11_state.EPFail
ALL_GPU = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def engine_folder(providers) -> Path | None:
    """Where TensorRT's provider keeps its engines, where it is the first provider and caches
    them."""
    name, options = providers[0] if isinstance(providers[0], tuple) else (providers[0], {})
    # ORT's Python session hands every option on as str(value); the provider reads a bool from
    # "True"/"true"/"1" (so "False", a true string in Python, is off)
    caching = str(options.get("trt_engine_cache_enable", False)).lower() in ("true", "1")
    if name != "TensorrtExecutionProvider" or not caching:
        return None
    return Path(str(options["trt_engine_cache_path"]))


class FakeGpuSession:
    """An ORT session that says which providers it got, as a session on a GPU host would; it
    computes on the CPU. `placed` is what get_providers() returns; `cpu_kernels` kernels of its
    profile ran on the CPU, the rest on placed[0] (with `enable_cuda_graph` such a session is
    refused when it is made, as ORT refuses a graph capture unless every compute node is on
    CUDA). From run number `fail_from` on, its first provider fails (EPFail) and, as ORT's Python
    session does, with fallback enabled it switches to the CPU and retries silently;
    `disable_fallback` is False for a session without that method (an older ORT)."""

    placed = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    cpu_kernels = 0
    fail_from = None
    last = None

    def __init__(self, path_or_bytes, sess_options=None, providers=None, **kwargs):
        assert set(kwargs) <= {"enable_fallback"}, kwargs
        check_provider_options(providers)
        self.asked = providers
        self.cuda_graph = any(
            isinstance(p, tuple) and p[1].get("enable_cuda_graph") == "1" for p in providers
        )
        if self.cuda_graph and self.cpu_kernels:
            # ORT checks the partition when the session is made, not at the capture
            raise RuntimeError(
                "[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture feature "
                "as requested by the user as all compute graph nodes have not been partitioned to "
                "the CUDAExecutionProvider"
            )
        self.graph_runs = 0  # ORT's CUDA graph: warm-up runs, then it captures and replays
        self.captured = None
        self.enable_fallback_arg = kwargs.get("enable_fallback")
        self._enable_fallback = int(kwargs.get("enable_fallback", 1)) == 1  # ORT's own reading
        self.real = RealSession(
            path_or_bytes, sess_options=sess_options, providers=["CPUExecutionProvider"]
        )
        self.runs = 0  # plain session.run calls
        self.calls = 0  # every run, plain or bound
        self.bindings: list = []
        self.placed = list(self.placed)
        self.model = path_or_bytes
        self.engine_folder = engine_folder(providers)
        self.engine_profile = None  # [lowest, highest] batch of the engine in use
        self.engine_builds = 0
        if self.engine_folder and all(isinstance(d, int) for d in self._input_dims()):
            self._build_engine()  # static shapes: TensorRT's provider builds at creation
            self.engine_folder = None
        FakeGpuSession.last = self

    def _input_dims(self):
        return [d for i in self.real.get_inputs() for d in i.shape]

    def _build_engine(self, batch: int | None = None):
        """As TensorRT's provider with its engine cache on: one engine file per graph in
        trt_engine_cache_path (its name has no shapes) and, for a dynamic batch, its profile beside
        it. An engine is read where one is cached (a static graph's) or its profile holds the batch;
        otherwise the profile is widened to hold the batch and the engine built again over the
        file, at any run (a build takes time)."""
        graph = hashlib.sha1(str(self.model).encode()).hexdigest()[:12]
        stem = f"TensorrtExecutionProvider_TRTKernel_graph_main_{graph}_0_0_sm90"
        engine, profile = (self.engine_folder / f"{stem}.{end}" for end in ("engine", "profile"))
        if batch is None:
            built = not engine.exists()
        else:
            if self.engine_profile is None and engine.exists() and profile.exists():
                self.engine_profile = json.loads(profile.read_text())
            low, high = self.engine_profile or (batch, batch)
            built = self.engine_profile is None or not low <= batch <= high
            self.engine_profile = [min(low, batch), max(high, batch)]
        if built:
            time.sleep(0.02)
            self.engine_folder.mkdir(parents=True, exist_ok=True)
            engine.write_bytes(b"serialized engine " + json.dumps(self.engine_profile).encode())
            if batch is not None:
                profile.write_text(json.dumps(self.engine_profile))
        self.engine_builds += built

    def disable_fallback(self):
        self._enable_fallback = False

    def get_providers(self):
        return list(self.placed)

    def get_outputs(self):
        return self.real.get_outputs()

    def run(self, output_names, input_feed, run_options=None):
        if self.cuda_graph:
            raise RuntimeError(
                "[ONNXRuntimeError] : the CUDA graph needs inputs and outputs bound with IOBinding "
                "to CUDA memory at fixed addresses"
            )
        self.runs += 1
        self._provider_step(len(next(iter(input_feed.values()))))
        return self.real.run(output_names, input_feed)

    def _provider_step(self, batch: int):
        """Every run, plain or bound: a dynamic-shape graph's engine read or built for the batch;
        from run `fail_from` on, the first provider fails."""
        if self.engine_folder:
            self._build_engine(batch)
        self.calls += 1
        if (
            self.fail_from is not None
            and self.calls >= self.fail_from
            and self.placed[0] != "CPUExecutionProvider"
        ):
            if not self._enable_fallback:
                raise EPFail(f"[ONNXRuntimeError] : 11 : EP_FAIL : {self.placed[0]} failed")
            self.placed = ["CPUExecutionProvider"]  # ORT: set_providers(fallback), then retry once
            self._enable_fallback = False

    def io_binding(self):
        binding = FakeBinding()
        self.bindings.append(binding)
        return binding

    def run_with_iobinding(self, iobinding, run_options=None):
        """Computes on the CPU from what is bound. With the CUDA graph on: every input and output
        bound to CUDA; after ORT's warm-up runs the graph is captured on the bound OrtValues, and a
        replay reads and writes exactly those (a binding changed after the capture is not seen)."""
        binding = iobinding
        names = [i.name for i in self.real.get_inputs()]
        missing = [n for n in names if n not in binding.inputs] + [
            o for o in self._output_names() if o not in binding.outputs
        ]
        if missing:
            raise RuntimeError(f"[ONNXRuntimeError] : not bound: {missing}")
        self._provider_step(len(binding.inputs[names[0]].numpy()))
        if self.cuda_graph:
            self._graph_run(binding)
        else:
            outs = self.real.run(None, {n: binding.inputs[n].numpy() for n in names})
            binding.results = [
                binding.outputs[o]._receive(v)
                for o, v in zip(self._output_names(), outs, strict=True)
            ]
        binding.runs += 1

    def _graph_run(self, binding):
        if any(v.device != "cuda" for v in [*binding.inputs.values(), *binding.outputs.values()]):
            raise RuntimeError(
                "[ONNXRuntimeError] : the CUDA graph needs every input and output bound to CUDA"
            )
        self.graph_runs += 1
        if self.captured is None and self.graph_runs > ORT_GRAPH_WARMUP:
            if any(v.fresh for v in binding.outputs.values()):
                raise RuntimeError(
                    "[ONNXRuntimeError] : CUDA graph capture needs outputs at fixed addresses "
                    "(bind pre-allocated OrtValues)"
                )
            self.captured = (dict(binding.inputs), dict(binding.outputs))
        inputs, outputs = self.captured or (binding.inputs, binding.outputs)
        outs = self.real.run(None, {n: v.numpy() for n, v in inputs.items()})
        binding.results = [
            outputs[o]._receive(v) for o, v in zip(self._output_names(), outs, strict=True)
        ]

    def _output_names(self):
        return [o.name for o in self.real.get_outputs()]

    def end_profiling(self):
        path = self.real.end_profiling()
        with open(path) as f:
            events = json.load(f)
        kernels = [
            e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
        ]
        for i, event in enumerate(kernels):
            event["args"]["provider"] = (
                "CPUExecutionProvider" if i < self.cpu_kernels else self.placed[0]
            )
        with open(path, "w") as f:
            json.dump(events, f)
        return path


ORT_GRAPH_WARMUP = 2  # ORT runs this many times before it captures its CUDA graph
CUDA_OPTIONS = {
    "device_id",
    "enable_cuda_graph",
    "cudnn_conv_algo_search",
    "gpu_mem_limit",
    "arena_extend_strategy",
    "do_copy_in_default_stream",
    "cudnn_conv_use_max_workspace",
    "use_tf32",
    "prefer_nhwc",
}
TRT_OPTIONS = {
    "device_id",
    "trt_fp16_enable",
    "trt_int8_enable",
    "trt_engine_cache_enable",
    "trt_engine_cache_path",
    "trt_max_workspace_size",
    "trt_timing_cache_enable",
    "trt_timing_cache_path",
    "trt_min_subgraph_size",
    "trt_builder_optimization_level",
    "trt_cuda_graph_enable",
    "trt_int8_calibration_table_name",
}


def check_provider_options(providers):
    """ORT refuses an option name its provider does not know (as the real providers do)."""
    known = {"CUDAExecutionProvider": CUDA_OPTIONS, "TensorrtExecutionProvider": TRT_OPTIONS}
    for p in providers or []:
        if isinstance(p, tuple):
            unknown = set(p[1]) - known[p[0]]
            if unknown:
                raise RuntimeError(
                    f"[ONNXRuntimeError] : unknown provider option(s) {sorted(unknown)} for {p[0]}"
                )


class FakeOrtValue:
    """An OrtValue: memory on 'cpu' or 'cuda' (a CPU array here), fixed once allocated."""

    fresh = False  # an OrtValue already has its memory (see AllocatingOutput)

    def __init__(self, array, device="cpu", device_id=0):
        self.array, self.device, self.device_id = np.array(array), device, device_id

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0):
        assert isinstance(numpy_obj, np.ndarray), type(numpy_obj)
        return cls(numpy_obj, device_type, device_id)

    def update_inplace(self, data):
        if data.shape != self.array.shape or data.dtype != self.array.dtype:
            raise RuntimeError("update_inplace: shape and type must not change")
        self.array[...] = data

    def _receive(self, value):  # a run writes into this value's own memory
        self.array[...] = value
        return self

    def numpy(self):
        return self.array.copy()

    def shape(self):
        return list(self.array.shape)


class AllocatingOutput:
    """An output bound by device only: ORT allocates a new OrtValue for it in every run."""

    def __init__(self, device, device_id):
        self.device, self.device_id, self.fresh = device, device_id, True

    def _receive(self, value):
        return FakeOrtValue(value, self.device, self.device_id)


class FakeBinding:
    """ORT's IOBinding: inputs bound from host arrays or OrtValues, outputs by device or to
    OrtValues."""

    def __init__(self):
        self.inputs, self.outputs, self.runs, self.results = {}, {}, 0, []

    def bind_cpu_input(self, name, arr_on_cpu):
        assert isinstance(arr_on_cpu, np.ndarray) and arr_on_cpu.flags.c_contiguous
        self.inputs[name] = FakeOrtValue(arr_on_cpu)

    def bind_ortvalue_input(self, name, ortvalue):
        self.inputs[name] = ortvalue

    def bind_output(
        self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None
    ):
        self.outputs[name] = AllocatingOutput(device_type, device_id)

    def bind_ortvalue_output(self, name, ortvalue):
        self.outputs[name] = ortvalue

    def get_outputs(self):
        return list(self.results)

    def copy_outputs_to_cpu(self):
        return [v.numpy() for v in self.results]


@pytest.fixture
def gpu_host(monkeypatch):
    """A four-GPU host (CUDA_VISIBLE_DEVICES=2,3) whose ORT offers every GPU provider."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    install(monkeypatch, FakeHost(four_boards()), nvml=False)
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(ALL_GPU))
    monkeypatch.setattr(ort, "InferenceSession", FakeGpuSession)
    monkeypatch.setattr(ort, "OrtValue", FakeOrtValue)
    monkeypatch.setattr(ort, "preload_dlls", lambda *a, **k: None, raising=False)
    monkeypatch.setattr(FakeGpuSession, "placed", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(FakeGpuSession, "cpu_kernels", 0)
    monkeypatch.setattr(FakeGpuSession, "fail_from", None)
    monkeypatch.setattr(ort_backend, "tensorrt_version", lambda: "10.13.0")
    return FakeGpuSession


def test_gpu_sessions_are_created_without_orts_fallback(small, gpu_host):
    session = get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1)
    assert gpu_host.last.enable_fallback_arg == 0 and gpu_host.last._enable_fallback is False
    assert session.description["providers"] == ["CUDAExecutionProvider", "CPUExecutionProvider"]


CFG = MeasureConfig(warmup=0, min_duration_s=0, min_count=5, clients=1)


@pytest.mark.parametrize("window", ["measure", "measure_window"])
def test_a_provider_failing_mid_run_is_an_error(small, gpu_host, window):
    session = get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1)
    gpu_host.last.fail_from = 3  # the warm-up at load was run 1
    with pytest.raises(
        BackendUnavailable,
        match="CUDA provider failed mid-run .ORT's fallback is disabled: "
        "nothing was timed on another provider.: .*EP_FAIL",
    ):
        getattr(session, window)(small.make_inputs(1), 1, CFG)


def test_a_silent_run_time_fallback_is_an_error(small, gpu_host, monkeypatch):
    """An ORT whose session keeps falling back (no disable_fallback): the providers read after the
    window differ, and the window is refused."""
    monkeypatch.delattr(FakeGpuSession, "disable_fallback")
    monkeypatch.setattr(FakeGpuSession, "__init__", fallback_on(FakeGpuSession.__init__))
    session = get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1)
    gpu_host.last.fail_from = 3
    with pytest.raises(
        BackendUnavailable,
        match="CUDA provider fell back during the timed calls: ONNX Runtime "
        "switched from CUDAExecutionProvider, CPUExecutionProvider to "
        "CPUExecutionProvider",
    ):
        session.measure_window(small.make_inputs(1), 1, CFG)


def test_a_fallback_in_the_warm_up_is_refused_at_load(small, gpu_host, monkeypatch):
    monkeypatch.delattr(FakeGpuSession, "disable_fallback")
    monkeypatch.setattr(FakeGpuSession, "__init__", fallback_on(FakeGpuSession.__init__))
    monkeypatch.setattr(FakeGpuSession, "fail_from", 1)
    with pytest.raises(BackendUnavailable, match="CUDA provider fell back during the warm-up run"):
        get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1)


def fallback_on(init):
    """An older ORT: no enable_fallback keyword either, its fallback always on."""

    def patched(self, path, sess_options=None, providers=None, **kwargs):
        init(self, path, sess_options, providers)

    return patched


def test_cuda_provider_falling_back_to_cpu_is_refused(small, gpu_host):
    gpu_host.placed = ["CPUExecutionProvider"]
    with pytest.raises(
        BackendUnavailable,
        match="CUDA backend unavailable: ONNX Runtime could not start "
        "CUDAExecutionProvider and fell back to CPUExecutionProvider",
    ):
        get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1)


def test_tensorrt_falling_back_to_cuda_is_refused(small, gpu_host):
    gpu_host.placed = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.raises(
        BackendUnavailable, match="TENSORRT backend unavailable.*fell back to CUDAExecutionProvider"
    ):
        get_backend("onnxruntime").load(small, BackendConfig(device="tensorrt"), 1)


def test_gpu_session_records_device_and_cpu_kernel_share(small, gpu_host):
    gpu_host.cpu_kernels = 2
    session = get_backend("onnxruntime").load(
        small, BackendConfig(device="cuda", options={"device_id": 1}), 2
    )
    d = session.description
    kernels = d["placement"]["kernels"]
    assert kernels > 2 and d["placement"]["kernels_by_provider"]["CPUExecutionProvider"] == 2
    assert d["cpu_node_share"] == pytest.approx(2 / kernels)
    # CUDA ordinal 1 under CUDA_VISIBLE_DEVICES=2,3 is the fourth board in PCI order
    assert d["cuda_device"]["index"] == 1 and d["cuda_device"]["pci_bus_id"] == "00000000:81:00.0"
    assert gpu_host.last.asked[0] == ("CUDAExecutionProvider", {"device_id": 1})
    assert gpu_host.last.runs == 1  # the profiled warm-up at load, before any timed window
    # the CUDA provider's use_tf32 default
    assert d["timing"].startswith("host-to-host") and d["math"] == "tf32"
    off = BackendConfig(
        device="cuda", options={"provider_options": {"CUDAExecutionProvider": {"use_tf32": "0"}}}
    )
    assert get_backend("onnxruntime").load(small, off, 1).description["math"] == "fp32"


def test_gpu_timing_is_host_to_host_and_device_resident_is_labelled(small, gpu_host):
    session = get_backend("onnxruntime").load(
        small, BackendConfig(device="cuda", options={"device_id": 1}), 2
    )
    fake = gpu_host.last
    cfg = MeasureConfig(warmup=0, min_duration_s=0, min_count=3, clients=2)
    m = session.measure(small.make_inputs(2), 2, cfg)
    # every timed call runs an IO binding of host arrays with outputs bound to the CPU: ORT copies
    # in and out
    assert (
        m.extra["timing"].startswith("host-to-host")
        and "each its own IO binding" in m.extra["clients"]
    )
    # one binding per client
    assert len(fake.bindings) == 2 and fake.bindings[0] is not fake.bindings[1]
    for b in fake.bindings:
        assert {v.device for v in b.inputs.values()} == {"cpu"} and {
            o.device for o in b.outputs.values()
        } == {"cpu"}
    # 1: the load's warm-up
    assert [b.runs for b in fake.bindings] == [len(t) for t in m.calls] and fake.runs == 1
    resident = session.measure_device_resident(small.make_inputs(2), 2, cfg)
    assert (
        resident.extra["timing"].startswith("device-resident")
        and "not comparable" in resident.extra["timing"]
    )
    staged = fake.bindings[2:]
    assert len(staged) == 2 and all(
        {(v.device, v.device_id) for v in [*b.inputs.values(), *b.outputs.values()]}
        == {("cuda", 1)}
        for b in staged
    )
    assert [b.runs for b in staged] == [len(t) for t in resident.calls] and min(
        b.runs for b in staged
    ) >= 3


def test_ort_cuda_graph_binds_fixed_cuda_buffers_and_copies_each_call(small, gpu_host, reference):
    cfg = BackendConfig(device="cuda", options={"cuda_graph": True})
    session = get_backend("onnxruntime").load(small, cfg, 4)
    fake = gpu_host.last
    assert gpu_host.last.asked[0] == (
        "CUDAExecutionProvider",
        {"device_id": 0, "enable_cuda_graph": "1"},
    )
    # no session.run: the graph binding warmed up
    assert session.description["cuda_graph"] is True and fake.runs == 0
    inputs = small.make_inputs(4)
    for _ in range(3):  # past ORT's warm-up runs: captured, then replayed
        out = session.run(inputs)
    assert fake.captured is not None and NumericDiff.between(reference, out).max_abs == 0.0
    # a replay sees new inputs only through update_inplace
    other = session.run(small.make_inputs(4, seed=7))
    assert np.abs(other[0] - out[0]).max() > 1e-4
    call = session.bind(inputs)
    assert call is session.graph and NumericDiff.between(reference, call()).max_abs == 0.0
    with pytest.raises(InvalidParameter, match="clients=2: 1 with cuda_graph"):
        # the study's clients, too
        session.measure_window(
            inputs, 4, MeasureConfig(warmup=0, min_duration_s=0, min_count=2, clients=2)
        )
    with pytest.raises(InvalidParameter, match="clients=2: 1 with cuda_graph"):
        get_backend("onnxruntime").load(
            small, BackendConfig(device="cuda", options={"cuda_graph": True, "clients": 2}), 4
        )
    with pytest.raises(InvalidParameter, match="cuda_graph=True: only on device cuda"):
        get_backend("onnxruntime").load(
            small, BackendConfig(device="tensorrt", options={"cuda_graph": True}), 4
        )


def test_a_cuda_graph_session_with_nodes_on_the_cpu_is_unavailable(small, gpu_host):
    """ORT makes no CUDA-graph session for a model some of whose compute nodes it places on the
    CPU: the candidate is unavailable, naming why, and the same model loads without the graph."""
    gpu_host.cpu_kernels = 2
    with pytest.raises(BackendUnavailable, match="all compute graph nodes have not been partit"):
        get_backend("onnxruntime").load(
            small, BackendConfig(device="cuda", options={"cuda_graph": True}), 2
        )
    plain = get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 2)
    assert plain.description["placement"]["kernels_by_provider"]["CPUExecutionProvider"] == 2


def test_the_double_refuses_what_ort_refuses(small, gpu_host):
    """Break on purpose: a graph binding that lets ORT allocate its outputs, a plain run on a graph
    session, an unknown provider option."""
    session = get_backend("onnxruntime").load(
        small, BackendConfig(device="cuda", options={"cuda_graph": True}), 1
    )
    with pytest.raises(RuntimeError, match="bound with IOBinding"):
        session.session.run(None, small.make_inputs(1))
    binding = session.session.io_binding()
    for name, value in small.make_inputs(1).items():
        binding.bind_ortvalue_input(name, FakeOrtValue(value, "cuda"))
    for name in session.output_names:
        binding.bind_output(name, "cuda", 0)
    fresh = FakeGpuSession(
        str(small.onnx_path), providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"})]
    )
    with pytest.raises(RuntimeError, match="outputs at fixed addresses"):
        for _ in range(ORT_GRAPH_WARMUP + 1):
            fresh.run_with_iobinding(binding)
    with pytest.raises(RuntimeError, match="unknown provider option"):
        FakeGpuSession(
            str(small.onnx_path), providers=[("CUDAExecutionProvider", {"cuda_graph": "1"})]
        )


@pytest.mark.parametrize("window", ["measure", "measure_window"])
def test_cpu_clients_each_get_their_own_binding(small, window):
    session = get_backend("onnxruntime").load(small, BackendConfig(), 1)

    class Counting:
        def __init__(self, real):
            self.real, self.bindings = real, []

        def __getattr__(self, name):
            return getattr(self.real, name)

        def io_binding(self):
            self.bindings.append(self.real.io_binding())
            return self.bindings[-1]

    proxy = Counting(session.session)
    counted = OrtSession(proxy, session.description)
    m = getattr(counted, window)(
        small.make_inputs(1), 1, MeasureConfig(warmup=0, min_duration_s=0, min_count=2, clients=3)
    )
    assert len(proxy.bindings) == 3 and len({id(b) for b in proxy.bindings}) == 3
    # every client ran, each its own binding
    assert len(m.calls) == 3 and all(len(t) >= 2 for t in m.calls)


def test_int8_on_plain_cuda_is_refused(small, gpu_host):
    with pytest.raises(InvalidParameter, match="int8.*no int8 kernels.*use device 'tensorrt'"):
        get_backend("onnxruntime").load(small, BackendConfig(precision="int8", device="cuda"), 1)


def test_tensorrt_int8_loads_a_symmetric_qdq_model_with_int8_enabled(small, gpu_host):
    gpu_host.placed = ALL_GPU
    session = get_backend("onnxruntime").load(
        small, BackendConfig(precision="int8", device="tensorrt"), 1
    )
    name, options = gpu_host.last.asked[0]
    assert name == "TensorrtExecutionProvider"
    assert options["trt_int8_enable"] is True and options["trt_fp16_enable"] is True
    # an engine build takes minutes: built once, cached
    assert options["trt_engine_cache_enable"] is True
    assert options["trt_engine_cache_path"] == session.description["trt_engine_cache_path"]
    # its layer timings in the kit's cache, not wherever ORT puts them by default, shared by the
    # batches whose engines each have a folder of their own below
    assert options["trt_timing_cache_enable"] is True
    engines = Path(options["trt_engine_cache_path"])
    assert engines == Path(options["trt_timing_cache_path"]) / "batch-1"
    assert (
        "S8S8" in session.description["conversion"]
        and session.description["tensorrt_version"] == "10.13.0"
    )
    proto = onnx.load(str(small.onnx_path.parent / session.description["model_file"]))
    zero_points = {i.name: i for i in proto.graph.initializer}
    quantize = [n for n in proto.graph.node if n.op_type == "QuantizeLinear"]
    assert quantize
    for node in quantize:  # activations: signed int8, symmetric (zero point 0)
        zp = onnx.numpy_helper.to_array(zero_points[node.input[2]])
        assert zp.dtype == "int8" and not zp.any()


def test_a_tensorrt_session_times_its_engine_build_and_a_second_reads_the_engine_cache(
    small, gpu_host, tmp_path, monkeypatch
):
    """The provider's engine work is the candidate's compile: `compile_s` from before the session
    to after its warm-up; `engine_reused` False where an engine file was written in the cache, True
    where every engine was read from it (the double builds and rebuilds as the provider does)."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    gpu_host.placed = ALL_GPU
    config = BackendConfig(precision="fp16", device="tensorrt")
    first = get_backend("onnxruntime").load(small, config, 1).description
    built = Path(first["trt_engine_cache_path"])
    assert first["engine_reused"] is False and first["compile_s"] >= 0.02
    assert [built / n for n in first["engines_built"]] == sorted(built.glob("*.engine"))
    again = get_backend("onnxruntime").load(small, config, 1).description
    assert again["engine_reused"] is True and again["engines_built"] == []
    gpu_host.placed = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    plain = get_backend("onnxruntime").load(small, BackendConfig(device="cuda"), 1).description
    assert "compile_s" not in plain and "engine_reused" not in plain


def test_each_batch_keeps_its_own_tensorrt_engine(small, gpu_host, tmp_path, monkeypatch):
    """The graph's batch axis is dynamic: in one engine folder a batch-4 session after a batch-1
    one would widen the cached profile and build over the batch-1 engine, and the batch-1 session
    after it would run an engine built for 1 to 4. Each batch has a folder of its own: its engine
    is built once, for it alone, and read again after another batch's."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    gpu_host.placed = ALL_GPU
    config = BackendConfig(precision="fp16", device="tensorrt")
    loads = [get_backend("onnxruntime").load(small, config, b) for b in (1, 4, 1, 4)]
    assert [s.description["engine_reused"] for s in loads] == [False, False, True, True]
    assert [s.session.engine_profile for s in loads] == [[1, 1], [4, 4], [1, 1], [4, 4]]
    folders = {s.description["trt_engine_cache_path"] for s in loads}
    assert {Path(f).name for f in folders} == {"batch-1", "batch-4"}
    # a folder of the user's own is theirs: batches share it, and a rebuild over an engine's file
    # is a build, not a read
    given = {"TensorrtExecutionProvider": {"trt_engine_cache_path": str(tmp_path / "mine")}}
    mine = BackendConfig(precision="fp16", device="tensorrt", options={"provider_options": given})
    shared = [get_backend("onnxruntime").load(small, mine, b) for b in (1, 4, 1)]
    assert [s.description["engine_reused"] for s in shared] == [False, False, True]
    assert [s.session.engine_profile for s in shared] == [[1, 1], [1, 4], [1, 4]]
    assert len(list((tmp_path / "mine").glob("*.engine"))) == 1


def test_symmetric_int8_runs_close_to_fp32_on_the_cpu(small, reference):
    from kit.backends.onnx_conversion import convert_for_ort

    path = convert_for_ort(small, "int8", symmetric=True)
    assert "static-qdq-s8s8" in path.name
    out = RealSession(str(path), providers=["CPUExecutionProvider"]).run(None, small.make_inputs(4))
    assert NumericDiff.between(reference, out).max_abs <= BOUNDS["int8"]


def test_tensorrt_engine_cache_is_keyed_by_version_options_and_gpu(monkeypatch, gpu_host):
    def path(precision="fp16", device_id=0):
        return provider_options(
            BackendConfig(precision=precision, device="tensorrt", options={"device_id": device_id})
        )["TensorrtExecutionProvider"]["trt_engine_cache_path"]

    base = path()
    assert "trt-10.13.0-" in base and path() == base
    assert path("int8") != base  # other options, other engines
    # same GPU model, same engines (device_id is not part of the key)
    assert path(device_id=1) == base
    monkeypatch.setattr(ort_backend, "tensorrt_version", lambda: "10.14.1")
    assert path() != base and "trt-10.14.1-" in path()


def test_device_id_must_be_an_ordinal():
    with pytest.raises(InvalidParameter, match="device_id"):
        provider_options(BackendConfig(device="cuda", options={"device_id": "1"}))


def test_placement_from_a_real_profile(small, tmp_path):
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "p")
    session = RealSession(
        str(small.onnx_path), sess_options=opts, providers=["CPUExecutionProvider"]
    )
    session.run(None, small.make_inputs(1))
    profile = session.end_profiling()
    placement = placement_from_profile(Path(profile))
    assert placement["kernels"] > 10 and placement["cpu_share"] == 1.0
    assert list(placement["kernels_by_provider"]) == ["CPUExecutionProvider"]
    assert not list(tmp_path.iterdir())  # the profile is removed after reading


def test_ort_version_from_the_gpu_distribution(monkeypatch, small):
    real = importlib.metadata.version

    def version(name):
        if name == "onnxruntime":
            raise importlib.metadata.PackageNotFoundError(name)
        return "1.31.1" if name == "onnxruntime-gpu" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert onnxruntime_version() == "1.31.1"
    from kit.backends.onnx_conversion import conversion_settings

    assert conversion_settings(small, "fp16")["onnxruntime"] == "1.31.1"  # the conversion cache key


def test_a_gpu_search_tries_the_cuda_graph_and_clients_of_onnx_runtime():
    from kit.search.candidates import row_candidates

    labels = {
        c.label: c.depth
        for c in row_candidates("onnx", "cuda", providers=["TensorrtExecutionProvider"])
    }
    assert (
        labels["onnxruntime fp16 cuda-graph (cuda)"] == "quick"
        and labels["onnxruntime fp16 clients=2 (cuda)"] == "full"
    )
    assert {"onnxruntime fp16 (tensorrt)", "onnxruntime int8 (tensorrt)"} <= set(labels)
