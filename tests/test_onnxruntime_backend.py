"""kit.backends.onnxruntime_backend: every precision loads and runs; absent devices say so."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from kit.backends import BackendConfig, get_backend
from kit.backends.onnxruntime_backend import provider_options
from kit.errors import BackendUnavailable, InvalidParameter
from kit.measure import MeasureConfig
from kit.numerics import NumericDiff

BOUNDS = {"fp32": 0.0, "fp16": 1e-2, "int8": 0.2}  # max |diff| on softmax outputs in [0, 1]


@pytest.fixture(autouse=True)
def cache_env(small, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))


@pytest.fixture(scope="module")
def reference(small):
    return get_backend("onnxruntime").load(small, BackendConfig(), 4).run(small.make_inputs(4))


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_precision_runs_close_to_fp32(small, reference, precision):
    session = get_backend("onnxruntime").load(small, BackendConfig(precision=precision, threads=1), 4)
    out = session.run(small.make_inputs(4))
    assert out[0].shape == (4, 10)
    diff = NumericDiff.between(reference, out)
    assert diff.max_abs <= BOUNDS[precision] and diff.nan_count == 0
    if precision != "fp32":
        assert diff.max_abs > 0 and "conversion" in session.description
    assert session.description["precision"] == precision and session.description["threads"] == 1


def test_bind_and_measure(small):
    session = get_backend("onnxruntime").load(small, BackendConfig(precision="int8"), 2)
    m = session.measure(small.make_inputs(2), 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3))
    assert m.latency.count == 3 and m.throughput > 0


@pytest.mark.parametrize(("precision", "hint"), [("bf16", "torch"), ("fp8", "int8")])
def test_unsupported_precision_says_what_to_use(small, precision, hint):
    with pytest.raises(InvalidParameter, match=hint):
        get_backend("onnxruntime").load(small, BackendConfig(precision=precision), 1)


def test_unknown_precision_names_allowed():
    with pytest.raises(InvalidParameter, match="one of fp32, fp16, bf16, int8, fp8"):
        BackendConfig(precision="fp64")


@pytest.mark.parametrize("device", ["cuda", "tensorrt"])
def test_absent_gpu_provider_is_a_clear_message(small, device):
    wanted = "CUDAExecutionProvider" if device == "cuda" else "TensorrtExecutionProvider"
    if wanted in ort.get_available_providers():
        pytest.skip(f"{wanted} is present here")
    with pytest.raises(BackendUnavailable, match=f"{device.upper()} backend unavailable.*onnxruntime-gpu"):
        get_backend("onnxruntime").load(small, BackendConfig(device=device), 1)


def test_unknown_device(small):
    with pytest.raises(BackendUnavailable, match="no device 'ipu'"):
        get_backend("onnxruntime").load(small, BackendConfig(device="ipu"), 1)


def test_provider_list_with_options_when_present():
    backend = get_backend("onnxruntime")
    cfg = BackendConfig(precision="fp16", device="tensorrt",
                        options={"provider_options": {"TensorrtExecutionProvider": {"trt_max_workspace_size": 1}}})
    providers = backend.providers(cfg, ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    trt_name, trt_opts = providers[0]
    assert trt_name == "TensorrtExecutionProvider" and trt_opts["trt_fp16_enable"] is True
    assert trt_opts["trt_max_workspace_size"] == 1 and providers[-1] == "CPUExecutionProvider"
    assert provider_options(BackendConfig())["TensorrtExecutionProvider"]["trt_fp16_enable"] is False
