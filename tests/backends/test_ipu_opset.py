"""The graphs the IPU compiles are exported at ByteMLPerf's opset 11, which PopRT's Converter
(`convert_version`, 11 by default) keeps: every zoo model's small IPU export goes through the
double's Converter, as PopRT would, and its outputs under ONNX Runtime stay the original's."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from kit.backends import export_opset
from kit.backends.ipu import IpuBackend
from kit.models import DEFAULT_OPSET, export_model, model_names

RTOL = 1e-4  # fp32 both ways; only the int64 -> int32 input cast and shape fixing differ


def ort_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    dtypes = {
        "tensor(int32)": np.int32,
        "tensor(int64)": np.int64,
        "tensor(float)": np.float32,
        "tensor(bool)": np.bool_,
    }
    return session.run(None, {n: feeds[n].astype(dtypes[types[n]]) for n in types})


def converted_by_poprt(poprt, exported, model: onnx.ModelProto) -> onnx.ModelProto:  # noqa: F811
    shapes = {s.name: list(s.shape_for(1)) for s in exported.inputs}
    return poprt.converter.Converter(input_shape=shapes, precision="fp32").convert(model)


def test_the_ipu_exports_at_poprts_convert_version_and_the_cpu_keeps_its_own():
    assert export_opset("ipu") == IpuBackend.export_opset == 11
    assert export_opset("onnxruntime") == DEFAULT_OPSET == 17


@pytest.mark.parametrize("name", model_names())
def test_each_zoo_models_ipu_graph_converts_to_opset_11_and_keeps_its_outputs(poprt, name):  # noqa: F811
    exported = export_model(name, small=True, opset=IpuBackend.export_opset)
    original = onnx.load(str(exported.onnx_path))
    assert exported.opset == 11
    assert [o.version for o in original.opset_import if o.domain in ("", "ai.onnx")] == [11]
    converted = converted_by_poprt(poprt, exported, original)
    assert [o.version for o in converted.opset_import if o.domain in ("", "ai.onnx")] == [11]
    feeds = exported.make_inputs(1, seed=3)
    want, got = ort_outputs(original, feeds), ort_outputs(converted, feeds)
    assert len(got) == len(want)
    for a, b in zip(want, got, strict=True):
        scale = max(float(np.abs(a).max()), 1e-6)
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * scale)


def test_the_double_refuses_a_zoo_graph_exported_at_the_cpus_opset_17(poprt):  # noqa: F811
    """What every IPU row did before: resnet50 at opset 17 has Identity-16, which ONNX cannot bring
    down to 11, so PopRT's Converter (and the double's) stops there."""
    exported = export_model("resnet50-torch-fp32", small=True, opset=DEFAULT_OPSET)
    with pytest.raises(RuntimeError, match=r"to opset 11 \(convert_version\)"):
        converted_by_poprt(poprt, exported, onnx.load(str(exported.onnx_path)))
