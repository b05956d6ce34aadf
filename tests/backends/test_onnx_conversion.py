"""kit.backends.onnx_conversion: fp16 and int8 ONNX files for ONNX Runtime, converted once and
cached."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kit.backends.onnx_conversion import conversion_label, convert_for_ort, quantization_method
from kit.errors import InvalidParameter
from kit.models import export_model
from kit.models.spec import ExportedModel, InputSpec, WeightsInfo


@pytest.fixture
def cache_env(small, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))


def run(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def op_types(path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def test_fp16_keeps_io_types_and_stays_close(small, cache_env):
    path = convert_for_ort(small, "fp16")
    assert path.parent == small.onnx_path.parent and "fp16" in path.name
    graph = onnx.load(str(path)).graph
    assert graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # keep_io_types
    assert any(init.data_type == TensorProto.FLOAT16 for init in graph.initializer)
    feeds = small.make_inputs(2)
    ref, got = run(small.onnx_path, feeds), run(path, feeds)
    assert 0 < np.abs(ref - got).max() < 1e-2


def test_conversion_is_cached(small, cache_env):
    first = convert_for_ort(small, "fp16")
    stamp = first.stat().st_mtime_ns
    assert convert_for_ort(small, "fp16") == first and first.stat().st_mtime_ns == stamp


def test_int8_static_qdq_for_cnn(small, cache_env):
    assert quantization_method(small) == "static-qdq"
    path = convert_for_ort(small, "int8")
    assert {"QuantizeLinear", "DequantizeLinear"} <= op_types(path)
    feeds = small.make_inputs(4)
    ref, got = run(small.onnx_path, feeds), run(path, feeds)
    diff = np.abs(ref - got)
    assert diff.max() > 0  # the conversion happened
    assert diff.max() < 0.2 and diff.mean() < 0.02  # softmax outputs in [0, 1]
    assert "static QDQ" in conversion_label(small, "int8")


def matmul_model(tmp_path) -> ExportedModel:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = tmp_path / "mm.onnx"
    onnx.save(model, str(path))
    return ExportedModel(
        name="mm",
        onnx_path=path,
        inputs=(InputSpec("x", (1, 64), "float32", low=-1, high=1),),
        outputs=("y",),
        weights=WeightsInfo("random", "seed 0"),
        task="question-answering",
    )


def test_int8_dynamic_for_matmul_models(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    model = matmul_model(tmp_path)
    assert quantization_method(model) == "dynamic"
    path = convert_for_ort(model, "int8")
    assert path.parent == tmp_path / "cache" / "converted"  # user files are not written beside
    assert "DynamicQuantizeLinear" in op_types(path)
    feeds = model.make_inputs(3)
    ref, got = run(model.onnx_path, feeds), run(path, feeds)
    assert 0 < np.abs(ref - got).max() < 0.05 * np.abs(ref).max()


def test_graph_picks_method_whatever_the_task(small, tmp_path):
    """Swin is an image model built of MatMuls: the graph, not the task name, decides."""
    assert (
        quantization_method(dataclasses.replace(small, task="text-classification")) == "static-qdq"
    )
    matmul = matmul_model(tmp_path)
    assert (
        quantization_method(dataclasses.replace(matmul, task="image-classification")) == "dynamic"
    )
    unreadable = dataclasses.replace(small, onnx_path=tmp_path / "missing.onnx")
    assert quantization_method(unreadable) == "static-qdq"  # no graph: the task name decides
    assert (
        quantization_method(dataclasses.replace(unreadable, task="text-classification"))
        == "dynamic"
    )


def test_quantization_can_be_asked_for_and_bad_values_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    model = matmul_model(tmp_path)
    assert quantization_method(model, "static-qdq") == "static-qdq"
    path = convert_for_ort(model, "int8", quantization="static-qdq")
    assert "QuantizeLinear" in op_types(path) and "DynamicQuantizeLinear" not in op_types(path)
    assert "static QDQ" in conversion_label(model, "int8", quantization="static-qdq")
    with pytest.raises(InvalidParameter, match="quantization='qat'.*static-qdq, dynamic"):
        convert_for_ort(model, "int8", quantization="qat")


@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp32"])
def test_unsupported_conversion_names_allowed(small, precision):
    with pytest.raises(InvalidParameter, match="fp16, int8"):
        convert_for_ort(small, precision)


def test_fp16_of_a_tf2onnx_graph_keeps_rejected_nodes_in_fp32():
    """tf2onnx's Cast(to=float) on id paths becomes fp16 and ORT refuses it; the converter
    repairs."""
    from kit.backends import BackendConfig, require_backend
    from kit.measure.numerics import NumericDiff

    model = export_model("widedeep-tf-fp32", small=True)
    session = require_backend("onnxruntime").load(model, BackendConfig("fp16"), 8)
    inputs = model.make_inputs(8)
    reference = require_backend("onnxruntime").load(model, BackendConfig(), 8).run(inputs)
    assert NumericDiff.between(reference, session.run(inputs)).max_abs < 0.05
