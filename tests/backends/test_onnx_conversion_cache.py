"""Conversions are keyed by the source's content; damaged or failed ones leave nothing stale."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kit.backends import onnx_conversion
from kit.backends.onnx_conversion import convert_for_ort
from kit.cache import CacheRebuilt
from kit.errors import CorruptModel
from kit.measure import memory
from kit.measure.memory import InsufficientMemory
from kit.models.spec import ExportedModel, InputSpec, WeightsInfo


def write_matmul(path, width: int, seed: int) -> ExportedModel:
    """x[batch, 64] @ w[64, width]: a tiny transformer-like (MatMul) model."""
    w = np.random.default_rng(seed).standard_normal((64, width)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return ExportedModel(
        name="mm",
        onnx_path=path,
        inputs=(InputSpec("x", (1, 64), "float32", low=-1, high=1),),
        outputs=("y",),
        weights=WeightsInfo("random", "seed 0"),
        task="question-answering",
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(memory.SKIP_CHECK_ENV, raising=False)
    return tmp_path / "cache" / "converted"


def output(path, model):
    feeds = model.make_inputs(2)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_a_model_replaced_at_the_same_path_is_converted_again(tmp_path, cache, precision):
    path = tmp_path / "model.onnx"
    first = convert_for_ort(write_matmul(path, 32, seed=0), precision)
    replaced = write_matmul(path, 256, seed=1)  # same path, a different (heavier) model
    second = convert_for_ort(replaced, precision)
    assert second != first
    got = output(second, replaced)
    assert got.shape == (2, 256)
    ref = output(path, replaced)
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


def int8_weight_range(path) -> int:
    """The largest magnitude of the int8 weights a quantised file holds."""
    tensors = [numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer]
    return max(int(np.abs(t.astype(np.int32)).max()) for t in tensors if t.dtype == np.int8)


@pytest.mark.parametrize("method", ["dynamic", "static-qdq"])
def test_int8_weights_are_7_bit_where_the_cpu_s_int8_kernels_saturate(
    tmp_path, cache, monkeypatch, method
):
    """On an AVX2-only EPYC ONNX Runtime's u8 x s8 kernels clipped their 16-bit sums: a MatMul's
    int8 output was 13 % off. Where the CPU has no VNNI/AMX, weights are 7-bit (ONNX Runtime's
    remedy), the conversion is keyed by it and its label says so; elsewhere they are 8-bit."""
    model = write_matmul(tmp_path / "model.onnx", 256, seed=1)
    ranges, labels = {}, {}
    for saturates in (False, True):
        monkeypatch.setattr(onnx_conversion, "int8_saturates", lambda s=saturates: s)
        ranges[saturates] = int8_weight_range(convert_for_ort(model, "int8", quantization=method))
        labels[saturates] = onnx_conversion.conversion_label(model, "int8", quantization=method)
    assert ranges[False] == 127 and ranges[True] <= 64
    assert "7-bit" in labels[True] and "7-bit" not in labels[False]


def test_a_truncated_conversion_is_rebuilt_with_a_note(tmp_path, cache):
    model = write_matmul(tmp_path / "model.onnx", 32, seed=0)
    converted = convert_for_ort(model, "fp16")
    good = converted.read_bytes()
    converted.write_bytes(good[: len(good) // 2])
    with pytest.warns(CacheRebuilt, match="truncated"):
        again = convert_for_ort(model, "fp16")
    assert again == converted and again.read_bytes() == good


def test_corrupt_conversion_metadata_is_rebuilt_with_a_note(tmp_path, cache):
    model = write_matmul(tmp_path / "model.onnx", 32, seed=0)
    converted = convert_for_ort(model, "int8")
    converted.with_suffix(".json").write_text("{not json")
    with pytest.warns(CacheRebuilt, match="unreadable metadata"):
        assert convert_for_ort(model, "int8") == converted
    assert output(converted, model).shape == (2, 32)


def test_a_failed_conversion_leaves_no_temporary_file(tmp_path, cache):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07 this is not a protobuf model")
    model = ExportedModel(
        name="broken",
        onnx_path=path,
        inputs=(InputSpec("x", (1, 64), "float32"),),
        outputs=("y",),
        weights=WeightsInfo("random", "seed 0"),
        task="question-answering",
    )
    with pytest.raises(CorruptModel, match="broken.onnx to fp16"):
        convert_for_ort(model, "fp16")
    assert not cache.exists() or list(cache.iterdir()) == []


def test_conversion_that_will_not_fit_fails_before_starting(tmp_path, cache, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000000 kB\nMemAvailable: 10000 kB\n")  # ~10 MB free
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    monkeypatch.setattr(memory, "CGROUP", tmp_path / "no-cgroup")
    model = write_matmul(tmp_path / "model.onnx", 32, seed=0)
    with pytest.raises(
        InsufficientMemory, match=r"converting model.onnx to int8 \(dynamic\) needs about"
    ):
        convert_for_ort(model, "int8")
    assert not cache.exists() or list(cache.iterdir()) == []


def test_calibration_session_runs_without_the_memory_arena(tmp_path):
    """ORT's arena grew Swin-L's calibration to 11 GB; the calibrator's session goes without it."""
    from onnxruntime.quantization.calibrate import create_calibrator

    from kit.backends.onnx_conversion import SeededReader, calibration_without_arena

    model = write_matmul(tmp_path / "model.onnx", 32, seed=0)
    with calibration_without_arena():
        calibrator = create_calibrator(
            model.onnx_path, augmented_model_path=str(tmp_path / "aug.onnx")
        )
    options = calibrator.infer_session.get_session_options()
    assert options.enable_cpu_mem_arena is False and options.enable_mem_pattern is False
    calibrator.collect_data(SeededReader(model))
    assert len(calibrator.compute_data().data) > 0  # ranges were collected through that session
