import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kit.models.flops import count_flops_per_sample
from kit.models.spec import InputSpec
from tests.onnx_graphs import save_graph


def save(tmp_path, nodes, inputs, outputs, inits):
    return save_graph(tmp_path / "m.onnx", nodes, inputs, outputs, inits)


def test_counts_conv_matmul_gemm_at_batch_one(tmp_path):
    w_conv = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "wc")
    w_mm = numpy_helper.from_array(np.zeros((8 * 4 * 4, 10), np.float32), "wm")
    w_gemm = numpy_helper.from_array(np.zeros((10, 5), np.float32), "wg")
    shape = numpy_helper.from_array(np.array([-1, 128], np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "wc"], ["c"], pads=[1, 1, 1, 1]),  # -> [B, 8, 4, 4]
        helper.make_node("Reshape", ["c", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "wm"], ["m"]),  # [B,128] x [128,10]
        helper.make_node("Gemm", ["m", "wg"], ["y"]),  # [B,10] x [10,5]
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])
    path = save(tmp_path, nodes, [x], [y], [w_conv, w_mm, w_gemm, shape])
    flops = count_flops_per_sample(path, (InputSpec("x", (1, 3, 4, 4), "float32"),))
    conv = 2 * (8 * 4 * 4) * (3 * 3 * 3)
    assert flops == conv + 2 * 128 * 10 + 2 * 10 * 5


def test_batched_matmul_counts_every_batch_dim(tmp_path):
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4, 6, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4, 8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6, 3])
    path = save(tmp_path, nodes, [a, b], [y], [])
    specs = (InputSpec("a", (1, 4, 6, 8), "float32"), InputSpec("b", (1, 4, 8, 3), "float32"))
    assert count_flops_per_sample(path, specs) == pytest.approx(2 * 4 * 6 * 3 * 8)


def test_large_weights_are_not_needed_to_count(tmp_path):
    """The count runs on a weightless copy: large float initializers become inputs, small ones
    stay."""
    from kit.models.flops import weightless

    w = numpy_helper.from_array(np.ones((64, 48), np.float32), "w")  # 3072 elements: moved
    shape = numpy_helper.from_array(np.array([-1, 64], np.int64), "shape")  # kept: values matter
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 48])
    path = save(tmp_path, nodes, [x], [y], [w, shape])
    light = weightless(onnx.load(str(path)))
    assert [t.name for t in light.graph.initializer] == ["shape"]
    assert [i.name for i in light.graph.input] == ["x", "w"]
    assert count_flops_per_sample(path, (InputSpec("x", (1, 8, 8), "float32"),)) == 2 * 64 * 48


def prompts_model(tmp_path):
    """Images x (batched) against 100 prompts t (not batched), as VideoBERT/CLIP zero-shot does."""
    w = numpy_helper.from_array(np.zeros((8, 16), np.float32), "w")
    perm = [1, 0]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xe"]),  # [B,8] x [8,16]
        helper.make_node("MatMul", ["t", "w"], ["te"]),  # [100,8] x [8,16]: once per call
        helper.make_node("Transpose", ["te"], ["tt"], perm=perm),
        helper.make_node("MatMul", ["xe", "tt"], ["y"]),
    ]  # [B,16] x [16,100]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [100, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 100])
    path = save(tmp_path, nodes, [x, t], [y], [w])
    return path, (
        InputSpec("x", (1, 8), "float32"),
        InputSpec("t", (100, 8), "float32", batched=False),
    )


def test_work_on_inputs_that_are_not_batched_is_shared_by_the_call(tmp_path):
    from kit.models.flops import count_flops_per_call, flops_split

    path, specs = prompts_model(tmp_path)
    per_sample, shared = flops_split(path, specs)
    assert per_sample == 2 * 8 * 16 + 2 * 16 * 100
    assert shared == 2 * 100 * 8 * 16
    assert count_flops_per_call(path, specs, 4) == shared + 4 * per_sample
    batched_only = (specs[0],)
    x_path = save(
        tmp_path,
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(np.zeros((8, 16), np.float32), "w")],
    )
    assert flops_split(x_path, batched_only) == (2 * 8 * 16, 0.0)


def test_an_operand_shape_inference_cannot_see_is_read_from_one_run(tmp_path):
    """A MatMul fed by a Reshape whose target size is data-dependent (NonZero's length): no shape
    inference can resolve it, so the count reads it from one ONNX Runtime run."""
    from kit.models.flops import inferred_shapes

    ones = numpy_helper.from_array(np.ones(64, np.float32), "ones")
    w = numpy_helper.from_array(np.zeros((64, 5), np.float32), "w")
    minus_one = numpy_helper.from_array(np.array([-1], np.int64), "minus_one")
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    # [1, 64] at run time, [1, ?] statically
    nodes = [
        helper.make_node("NonZero", ["ones"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["nz_shape"]),
        helper.make_node("Gather", ["nz_shape", "one"], ["width"], axis=0),
        helper.make_node("Concat", ["minus_one", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])
    path = save(tmp_path, nodes, [x], [y], [ones, w, minus_one, one])
    model = onnx.load(str(path))
    assert "r" not in inferred_shapes(model, symbolic=False)
    assert count_flops_per_sample(path, (InputSpec("x", (1, 8, 8), "float32"),)) == 2 * 64 * 5
