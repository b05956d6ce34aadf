"""kit.backends.torch_backend: the zoo's torch model at every precision, checked against ORT
fp32."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kit.backends import BackendConfig, get_backend, torch_backend
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware import cuda
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig
from kit.models import MODELS, export_model, get_entry

BOUNDS = {"fp32": 1e-4, "bf16": 0.1, "fp16": 0.05, "int8": 0.1}  # max |diff|, softmax outputs


@pytest.fixture(scope="module")
def reference(small):
    return get_backend("onnxruntime").load(small, BackendConfig(), 4).run(small.make_inputs(4))


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16", "int8"])
def test_precision_runs_close_to_ort_fp32(small, reference, precision):
    session = get_backend("torch").load(small, BackendConfig(precision=precision), 4)
    out = session.run(small.make_inputs(4))
    diff = NumericDiff.between(reference, out)
    assert out[0].shape == (4, 10) and diff.nan_count == 0
    assert diff.max_abs <= BOUNDS[precision]
    if precision != "fp32":
        assert diff.max_abs > 1e-6  # reduced precision really ran
    d = session.description
    assert d["precision"] == precision and d["channels_last"] is True and d["mode"] == "eager"


def test_description_says_what_ran(small):
    int8 = get_backend("torch").load(small, BackendConfig(precision="int8"), 1).description
    assert "1 Linear layers quantized" in int8["notes"][0]
    bf16 = get_backend("torch").load(small, BackendConfig(precision="bf16"), 1).description
    assert bf16["autocast"] == "bfloat16"


def test_bind_and_measure(small):
    session = get_backend("torch").load(small, BackendConfig(precision="bf16"), 2)
    m = session.measure(
        small.make_inputs(2), 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3)
    )
    assert m.latency.count == 3 and m.throughput > 0


def test_compile_failure_falls_back_to_eager(small, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(torch, "compile", broken)
    session = get_backend("torch").load(small, BackendConfig(options={"compile": True}), 1)
    assert session.description["mode"] == "eager"
    assert "torch.compile failed (no compiler here)" in session.description["notes"][-1]
    assert session.run(small.make_inputs(1))[0].shape == (1, 10)


def test_fp8_and_unknown_precision(small):
    with pytest.raises(InvalidParameter, match="int8 on CPU"):
        get_backend("torch").load(small, BackendConfig(precision="fp8"), 1)
    with pytest.raises(InvalidParameter, match="one of fp32"):
        BackendConfig(precision="int4")


def test_cuda_absent_is_a_clear_message(small):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    with pytest.raises(BackendUnavailable, match="CUDA backend unavailable"):
        get_backend("torch").load(small, BackendConfig(device="cuda"), 1)


def test_unknown_device(small):
    with pytest.raises(InvalidParameter, match="cpu, cuda"):
        get_backend("torch").load(small, BackendConfig(device="ipu"), 1)


def test_user_onnx_file_is_refused(small):
    user = dataclasses.replace(small, name="my-model.onnx", framework="onnx")
    with pytest.raises(InvalidParameter, match="backend onnxruntime"):
        get_backend("torch").load(user, BackendConfig(), 1)


def test_tensorflow_model_is_refused(small, monkeypatch):
    entry = dataclasses.replace(
        get_entry("resnet50-torch-fp32"), name="fake-tf", framework="tensorflow"
    )
    monkeypatch.setitem(MODELS._items, "fake-tf", entry)
    with pytest.raises(InvalidParameter, match="tensorflow model.*use backend onnxruntime"):
        get_backend("torch").load(dataclasses.replace(small, name="fake-tf"), BackendConfig(), 1)


def test_bf16_autocast_overflow_falls_back_to_bf16_weights():
    """DeBERTa fills attention masks with the fp32 minimum, which overflows under bf16 autocast."""
    from kit.backends import BackendConfig, require_backend
    from kit.measure.numerics import NumericDiff

    model = export_model("deberta-torch-fp32", small=True)
    session = require_backend("torch").load(model, BackendConfig("bf16"), 2)
    inputs = model.make_inputs(2)
    # the first run finds out, not an extra call
    assert session.description["autocast"] == "bfloat16"
    reference = require_backend("onnxruntime").load(model, BackendConfig(), 2).run(inputs)
    assert 0 < NumericDiff.between(reference, session.run(inputs)).max_abs < 0.05
    assert session.description["autocast"] is None
    assert any("weights cast to torch.bfloat16" in n for n in session.description["notes"])
    # timed before any run(): bind() checks first, so the timed call never raises the overflow
    timed = require_backend("torch").load(model, BackendConfig("bf16"), 2)
    call = timed.bind(inputs)
    assert timed.cast_floats == torch.bfloat16
    call()


# ---------------------------------------------------------------- CUDA paths, faked (no GPU needed)


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch says CUDA is there; the module stays on the CPU (device 'cpu' stands for cuda:N)."""
    gpu = cuda.CudaDevice(0, "00000000:01:00.0", "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch_backend, "torch_device", lambda config: ("cpu", gpu))
    return gpu


def test_fp16_on_cuda_uses_half_weights_not_autocast(small, reference, fake_cuda):
    session = get_backend("torch").load(small, BackendConfig(precision="fp16", device="cuda"), 4)
    d = session.description
    assert d["autocast"] is None and d["weights_dtype"] == "float16"
    assert any("model.half(), not autocast" in n for n in d["notes"])
    assert {p.dtype for p in session.module.parameters()} == {torch.float16}
    assert d["cuda_device"]["pci_bus_id"] == "00000000:01:00.0" and d["timing"].startswith(
        "host-to-host"
    )
    out = session.run(small.make_inputs(4))
    assert NumericDiff.between(reference, out).max_abs <= BOUNDS["fp16"]


def test_int8_on_cuda_is_refused(small, fake_cuda):
    with pytest.raises(InvalidParameter, match="CPU-only.*tensorrt"):
        get_backend("torch").load(small, BackendConfig(precision="int8", device="cuda"), 1)


def test_torch_honours_device_id_through_cuda_visible_devices(monkeypatch):
    from gpu_fakes import FakeHost, four_boards, install

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    install(monkeypatch, FakeHost(four_boards()), nvml=False)
    device, gpu = torch_backend.torch_device(BackendConfig(device="cuda", options={"device_id": 1}))
    assert device == "cuda:1" and gpu.pci_bus_id == "00000000:41:00.0"
    assert torch_backend.torch_device(BackendConfig()) == ("cpu", None)
    with pytest.raises(InvalidParameter, match="device_id"):
        torch_backend.torch_device(BackendConfig(device="cuda", options={"device_id": -1}))


def test_gpu_call_is_host_to_host(small, monkeypatch):
    """Each timed call copies the inputs in, runs, copies the outputs out and waits for its stream
    (tests/cuda_double.py stands for torch.cuda)."""
    from cuda_double import install, uninstall

    double = install(monkeypatch)
    try:
        session = get_backend("torch").load(small, BackendConfig(), 2)
        session.on_gpu = True  # the call structure of a GPU session, run on the CPU
        converted = []
        real = session.device_outputs
        monkeypatch.setattr(
            session, "device_outputs", lambda tensors: converted.append(1) or real(tensors)
        )
        cfg = MeasureConfig(warmup=0, min_duration_s=0, min_count=3, clients=2)
        m = session.measure(small.make_inputs(2), 2, cfg)
        assert (
            m.extra["timing"].startswith("host-to-host") and "own CUDA stream" in m.extra["clients"]
        )
        # one run and one stream sync per call, and one per client where its call is made (its
        # outputs' shapes for the pinned buffers it keeps)
        assert len(converted) == double.syncs == m.latency.count + 2 >= 8
        converted.clear()
        # the calls are kept: none made
        syncs, m = double.syncs, session.measure(small.make_inputs(2), 2, cfg)
        assert len(converted) == double.syncs - syncs == m.latency.count >= 6
        out = session.bind(small.make_inputs(2))()
        assert out[0].shape == (2, 10) and out[0].is_floating_point()
        resident = session.measure_device_resident(
            small.make_inputs(2), 2, MeasureConfig(warmup=0, min_duration_s=0, min_count=3)
        )
        assert resident.extra["timing"].startswith("device-resident")
    finally:
        uninstall(double)


def test_each_load_gets_its_own_copy_of_the_model_built_once(small, monkeypatch):
    """A search loads the same model for every candidate: it is built once per process and each
    session gets a copy, so one candidate's 16-bit weights, int8 layers or compilation never reach
    another's; the weights are the seeded build's, load after load."""
    entry = MODELS.get(small.name)
    builds = []
    monkeypatch.setitem(
        MODELS._items,
        small.name,
        dataclasses.replace(entry, build=lambda **k: builds.append(k) or entry.build(**k)),
    )
    torch_backend.built_module.cache_clear()
    first = get_backend("torch").load(small, BackendConfig(precision="fp32"), 1)
    with torch.no_grad():
        # what a candidate does to its own module (16-bit weights, compilation...)
        for p in first.module.parameters():
            p.zero_()
    second = get_backend("torch").load(small, BackendConfig(precision="fp32"), 1)
    assert len(builds) == 1 and first.module is not second.module
    fresh = entry.build(small=True, weights_dir=None, seed=torch_backend.weights_seed(small)).eval()
    for (name, got), want in zip(
        second.module.state_dict().items(), fresh.state_dict().values(), strict=True
    ):
        assert torch.equal(got, want), name
    torch_backend.built_module.cache_clear()


def test_a_session_is_timed_at_its_own_thread_count_after_another_load(small):
    """torch's thread count is per process: a search loads its next candidate (setting that one's)
    before the row's measurement times the session it kept (kit.search.keeping)."""
    before = torch.get_num_threads()
    try:
        one = get_backend("torch").load(small, BackendConfig(threads=1), 1)
        get_backend("torch").load(small, BackendConfig(threads=2), 1)
        assert torch.get_num_threads() == 2
        one.bind(small.make_inputs(1))
        assert torch.get_num_threads() == 1 == one.description["threads"]
    finally:
        torch.set_num_threads(before)


def test_a_compile_past_dynamos_recompile_limit_says_it_runs_eager(small, monkeypatch):
    """Static compiles (one per batch and precision) of one model class in one process reach
    dynamo's recompile limit; past it dynamo runs eager silently, so the session must say eager."""
    real_compile = torch.compile
    monkeypatch.setattr(
        torch,
        "compile",
        lambda module, mode=None, dynamic=None: (
            # dynamo's guards, no inductor
            real_compile(module, backend="eager", dynamic=dynamic)
        ),
    )
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    torch._dynamo.reset()
    try:
        first = (
            get_backend("torch")
            .load(small, BackendConfig(options={"compile": True}), 1)
            .description
        )
        second = (
            get_backend("torch")
            .load(small, BackendConfig(options={"compile": True}), 2)
            .description
        )
    finally:
        torch._dynamo.reset()
    assert first["mode"].startswith("torch.compile")
    assert second["mode"] == "eager" and "fell back to eager" in second["notes"][-1]
    # the fact the search reads
    assert second["compile_fallback"] and "compile_fallback" not in first
