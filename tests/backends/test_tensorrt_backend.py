"""kit.backends.tensorrt_backend through tests/tensorrt_double.py (TensorRT 10's Python API, its
build and runtime contract enforced, computing on the CPU) and tests/cuda_double.py (streams and
pinned memory): the engine built from the ONNX export and cached, the host-to-host call through
execute_async_v3, and a candidate that cannot load saying why."""

from __future__ import annotations

import numpy as np
import pytest
import tensorrt_double
from cuda_double import install as install_cuda
from cuda_double import uninstall

from kit.backends import BackendConfig, get_backend, require_backend
from kit.backends import tensorrt_backend as trt_backend
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware import cuda as kit_cuda
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig


def installed(monkeypatch, tmp_path, version: str):
    """TensorRT `version`'s double on an H200 made of the CUDA double, engines cached under
    tmp_path."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    double = install_cuda(monkeypatch)
    card = kit_cuda.CudaDevice(0, "00000000:01:00.0", "NVIDIA H200")
    monkeypatch.setattr(trt_backend, "gpu_device", lambda config: ("cpu", card))
    yield tensorrt_double.install(monkeypatch, version=version)
    uninstall(double)


@pytest.fixture
def trt(monkeypatch, small, tmp_path):
    """TensorRT 10: weakly typed, with the precision flags."""
    yield from installed(monkeypatch, tmp_path, "10.13.0.35")


@pytest.fixture(scope="module")
def reference(small):
    return get_backend("onnxruntime").load(small, BackendConfig(), 4).run(small.make_inputs(4))


def test_an_engine_is_built_once_cached_and_run_host_to_host(small, trt, reference):
    session = require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 4)
    d = session.description
    assert (
        d["builder_flags"] == ["FP16"]
        and d["math"] == "fp16"
        and d["engine_reused"] is False
        and d["timing"].startswith("host-to-host")
    )
    # what was built
    assert tensorrt_double.Builder.builds == 1 and session.engine.meta["flags"] == ["FP16"]
    # the double runs fp32
    assert NumericDiff.between(reference, session.run(small.make_inputs(4))).max_abs <= 1e-5
    other = session.run(small.make_inputs(4, seed=3))
    assert np.abs(other[0] - reference[0]).max() > 1e-4  # new inputs reach the context's buffers
    # the build is in the load's compile_s
    assert d["compile_s"] >= tensorrt_double.BUILD_S
    again = require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 4)
    assert again.description["engine_reused"] is True and tensorrt_double.Builder.builds == 1
    require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 2)
    assert tensorrt_double.Builder.builds == 2  # other shapes, another engine
    fp32 = require_backend("tensorrt").load(small, BackendConfig("fp32", "cuda"), 4)
    # another precision
    assert fp32.description["engine_reused"] is False and tensorrt_double.Builder.builds == 3
    assert fp32.engine.meta["flags"] == []


def test_clients_each_get_a_context_and_a_stream(small, trt):
    session = require_backend("tensorrt").load(
        small, BackendConfig("fp32", "cuda", options={"clients": 2}), 2
    )
    m = session.measure_window(
        small.make_inputs(2), 2, MeasureConfig(warmup=1, min_duration_s=0, min_count=3)
    )
    assert m.threads == 2 and "execution context" in m.extra["clients"]
    a, b = session.bind(small.make_inputs(2)), session.bind(small.make_inputs(2))
    assert a.context is not b.context and a.stream is not b.stream
    assert all(h.is_pinned() for h in [*a.host_in, *a.host_out])


def test_int8_builds_from_the_symmetric_qdq_model(small, trt):
    session = require_backend("tensorrt").load(small, BackendConfig("int8", "cuda"), 1)
    assert (
        session.description["builder_flags"] == ["INT8", "FP16"]
        and "s8s8" in session.description["model_file"]
    )
    assert session.engine.meta["flags"] == ["FP16", "INT8"]


def test_what_cannot_load_says_why(small, trt, monkeypatch):
    with pytest.raises(InvalidParameter, match="device='cpu': cuda"):
        require_backend("tensorrt").load(small, BackendConfig("fp16", "cpu"), 1)
    monkeypatch.setattr(
        tensorrt_double.Builder, "build_serialized_network", lambda self, n, c: None
    )
    with pytest.raises(BackendUnavailable, match="could not build an engine"):
        require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 1)


def test_the_double_refuses_what_tensorrt_refuses(small, trt):
    """Break on purpose: no optimization profile for a dynamic batch, an unparsed network, bytes
    that are not an engine, a context run before its addresses are set."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    assert builder.build_serialized_network(network, builder.create_builder_config()) is None
    parser = trt.OnnxParser(network, logger)
    assert not parser.parse(b"not onnx") and parser.num_errors == 1
    assert parser.parse(small.onnx_path.read_bytes())
    # batch is dynamic
    assert builder.build_serialized_network(network, builder.create_builder_config()) is None
    assert "no optimization profile" in logger.errors[-1]
    with pytest.raises(TypeError, match="BuilderFlag"):
        builder.create_builder_config().set_flag("FP16")
    assert trt.Runtime(logger).deserialize_cuda_engine(b"junk") is None
    junk = small.onnx_path.parent / "junk.onnx"
    junk.write_bytes(b"junk")
    with pytest.raises(BackendUnavailable, match="parser refused junk.onnx"):
        trt_backend.build_engine(trt, logger, junk, "fp16", small.make_inputs(1))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    for name, value in small.make_inputs(1).items():
        profile.set_shape(name, value.shape, value.shape, value.shape)
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger).deserialize_cuda_engine(
        builder.build_serialized_network(network, config)
    )
    context = engine.create_execution_context()
    assert context.execute_async_v3(0) is False and context.executions == 0
    assert "addresses or input shapes not set" in context.errors[0]


def test_tensorrt_absent_is_a_reason_not_a_crash():
    import importlib.util

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here")
    assert (
        get_backend("tensorrt").availability()
        == "TensorRT backend unavailable: tensorrt is not installed"
    )


def test_a_gpu_search_tries_tensorrt_only_where_its_python_api_is_installed(monkeypatch):
    from kit.search import candidates

    monkeypatch.setattr(candidates, "tensorrt_python", lambda: True)
    labels = [c.label for c in candidates.row_candidates("onnx", "cuda")]
    assert {"tensorrt fp16 (cuda)", "tensorrt int8 (cuda)"} <= set(labels)
    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)
    assert not [
        c for c in candidates.row_candidates("onnx", "cuda") if c.placement.backend == "tensorrt"
    ]


@pytest.fixture
def trt11(monkeypatch, small, tmp_path):
    """TensorRT 11.4 (the release pip installs today): strongly typed, no precision flags."""
    yield from installed(monkeypatch, tmp_path, "11.4.0.106")


def test_tensorrt_11_has_no_precision_flag_so_fp16_builds_from_the_fp16_graph(
    small, trt11, reference
):
    """TensorRT 11 removed BuilderFlag.FP16/INT8 with weak typing: asking for the flag raises
    AttributeError, so fp16 must come from the graph, and an engine built from the fp32 export
    would run fp32 while labelled fp16."""
    with pytest.raises(AttributeError):
        trt11.BuilderFlag.FP16  # noqa: B018 - the removed flag
    session = require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 4)
    d = session.description
    assert (d["typing"], d["builder_flags"], d["math"]) == ("strong", [], "fp16")
    assert "fp16" in d["model_file"]
    engine = session.calls[next(iter(session.calls))].context.engine
    assert engine.meta["weight_types"] == ["float16"] and engine.meta["flags"] == []
    assert NumericDiff.between(reference, session.run(small.make_inputs(4))).max_abs < 0.05


def test_tensorrt_11_int8_builds_from_the_qdq_graph_without_flags(small, trt11):
    session = require_backend("tensorrt").load(small, BackendConfig("int8", "cuda"), 1)
    d = session.description
    assert (
        d["builder_flags"] == []
        and "s8s8" in d["model_file"]
        and d["math"].startswith("int8 (quantized")
    )


def test_tensorrt_10_keeps_the_fp32_export_and_its_precision_flags(small, trt):
    session = require_backend("tensorrt").load(small, BackendConfig("fp16", "cuda"), 1)
    engine = session.calls[next(iter(session.calls))].context.engine
    assert session.description["typing"] == "weak" and engine.meta["flags"] == ["FP16"]
    assert (
        engine.meta["weight_types"] == ["float32"]
        and session.description["model_file"] == small.onnx_path.name
    )
