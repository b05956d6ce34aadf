import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from kit.errors import CorruptModel, InvalidParameter, MissingResource
from kit.models import load_model
from kit.models.onnx_file import load_onnx_file
from tests.onnx_graphs import save_graph


def relu_model(tmp_path, dims):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    z = helper.make_tensor_value_info("z", TensorProto.INT64, ["batch", 7])
    return save_graph(
        tmp_path / "user.onnx",
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["ids"], ["z"])],
        [x, ids],
        [y, z],
    )


def test_static_inputs_read_from_file(tmp_path):
    model = load_onnx_file(relu_model(tmp_path, ["batch", 3, 5]))
    assert [(i.name, i.shape, i.dtype, i.batched) for i in model.inputs] == [
        ("x", (1, 3, 5), "float32", True),
        ("ids", (1, 7), "int64", True),
    ]
    assert model.outputs == ("y", "z") and model.weights.source == "local"
    feeds = model.make_inputs(4)
    out = ort.InferenceSession(str(model.onnx_path)).run(None, feeds)
    assert out[0].shape == (4, 3, 5)


def test_dynamic_dims_besides_batch_must_be_given(tmp_path):
    path = relu_model(tmp_path, ["batch", 3, "length"])
    with pytest.raises(InvalidParameter, match="x dim 2"):
        load_onnx_file(path)
    model = load_model(str(path), input_shapes={"x": (1, 3, 11)})
    assert model.inputs[0].shape == (1, 3, 11)
    with pytest.raises(InvalidParameter, match="rank 3"):
        load_onnx_file(path, input_shapes={"x": (1, 11)})
    with pytest.raises(InvalidParameter, match="nope"):
        load_onnx_file(path, input_shapes={"nope": (1,)})


def test_input_shapes_that_contradict_a_fixed_dimension_name_the_input_the_index_and_both_values(
    tmp_path,
):
    """Issue 51: only the rank was checked; a contradicted fixed dimension was a raw ONNX Runtime
    error."""
    path = relu_model(tmp_path, ["batch", 3, "length"])
    with pytest.raises(InvalidParameter, match=r"input x: dim 1 is 3 in the file, not 4") as caught:
        load_onnx_file(path, input_shapes={"x": (1, 4, 11)})
    assert "(?, 3, ?)" in str(caught.value)
    with pytest.raises(InvalidParameter, match=r"input ids: dim 1 is 7 in the file, not 8"):
        load_onnx_file(path, input_shapes={"x": (1, 3, 11), "ids": (1, 8)})
    assert load_onnx_file(path, input_shapes={"x": (1, 3, 11), "ids": (1, 7)}).inputs[1].shape == (
        1,
        7,
    )


def test_fixed_first_dim_is_not_batched(tmp_path):
    model = load_onnx_file(relu_model(tmp_path, [100, 77]))
    assert model.inputs[0].batched is False and model.inputs[0].shape_for(8) == (100, 77)


def test_corrupt_file_names_the_file(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a protobuf at all \x00\xff")
    with pytest.raises(CorruptModel, match="broken.onnx"):
        load_onnx_file(bad)
    with pytest.raises(MissingResource, match="missing.onnx"):
        load_onnx_file(tmp_path / "missing.onnx")


def fixed_model(tmp_path, batch=2):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])
    text = helper.make_tensor_value_info("text", TensorProto.INT64, [100, 77])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])
    t = helper.make_tensor_value_info("t", TensorProto.INT64, [100, 77])
    return save_graph(
        tmp_path / "fixed.onnx",
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["text"], ["t"])],
        [x, text],
        [y, t],
    )


def test_fixed_batch_model_runs_only_at_its_own_size(tmp_path):
    """Issue 14 #2: a [2, 16] model asked for batch 1 or 4 is an error, never a scaled figure."""
    model = load_onnx_file(fixed_model(tmp_path, 2))
    assert model.fixed_batch_size == 2 and model.dynamic_batch is False
    assert [(i.name, i.shape, i.batched) for i in model.inputs] == [
        ("x", (1, 16), True),
        ("text", (100, 77), False),
    ]
    assert model.check_batch_size(2) == 2
    feeds = model.make_inputs(2)
    assert feeds["x"].shape == (2, 16) and feeds["text"].shape == (100, 77)
    assert ort.InferenceSession(str(model.onnx_path)).run(None, feeds)[0].shape == (2, 16)
    for wrong in (1, 4):
        with pytest.raises(
            InvalidParameter,
            match=r"2 only: fixed.onnx has a fixed batch dimension \(x \[2, 16\]\)",
        ):
            model.check_batch_size(wrong)
        with pytest.raises(InvalidParameter, match="batch_sizes=\\[2\\]"):
            model.make_inputs(wrong)


def test_dynamic_model_takes_any_batch_size(tmp_path):
    model = load_onnx_file(relu_model(tmp_path, ["batch", 3, 5]))
    assert model.fixed_batch_size is None and model.check_batch_size(64) == 64
    with pytest.raises(InvalidParameter, match="batch_size"):
        model.check_batch_size(0)


def test_fixed_batch_model_in_the_benchmark_is_an_error_per_wrong_size(tmp_path):
    """Issue 14 #2 end to end: batch 2 is measured, batches 1 and 4 fail with the reason; no scaled
    QPS."""
    from kit.studies import model_benchmark

    path = fixed_model(tmp_path, 2)
    result = model_benchmark.run(
        {
            "model": str(path),
            "batch_sizes": [1, 2, 4],
            "min_duration_s": 0.05,
            "min_count": 3,
            "warmup": 1,
            "accuracy": False,
            "power": False,
            "target_ci": 0.0,
        }
    )
    assert [m.batch_size for m in result.measurements] == [2]
    assert result.status == "error" and len(result.errors) == 2
    assert all("2 only: fixed.onnx has a fixed batch dimension" in e for e in result.errors)
    assert result.errors[0].startswith("batch 1:") and result.errors[1].startswith("batch 4:")


def fp16_model(tmp_path):
    import numpy as np

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 4])
    w = helper.make_tensor(
        "w", TensorProto.FLOAT16, [8, 4], np.ones((8, 4), np.float16).tobytes(), raw=True
    )
    return save_graph(
        tmp_path / "half.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w]
    )


def test_an_fp16_file_at_the_default_precision_is_run_labelled_and_judged_as_fp16(tmp_path):
    """It was labelled 'onnxruntime fp32' and judged against the fp32 peak."""
    from kit.studies import model_benchmark

    path = fp16_model(tmp_path)
    assert load_onnx_file(path).precision == "fp16"
    assert load_onnx_file(relu_model(tmp_path, ["batch", 3])).precision == "fp32"
    result = model_benchmark.run(
        {
            "model": str(path),
            "batch_sizes": [2],
            "min_duration_s": 0.05,
            "min_count": 3,
            "warmup": 1,
            "accuracy": False,
            "power": False,
            "target_ci": 0.0,
            "roofline": False,
        }
    )
    assert result.status == "ok", result.errors
    assert result.backend.precision == "fp16"
    assert "fp16: the file's own graph, no fp32 exists" in result.numerics[0].more["reference"]
    assert result.backend.device_info.peak.more["precision"] == "fp16"
    assert result.model.more["precision"] == "fp16"
    assert any("the precision of half.onnx's own graph" in n for n in result.notes)
    assert "conversion" not in result.backend.session.items  # the file ran as it is, not converted
    assert result.backend.session.more["model_file"] == "half.onnx"


def test_onnx_sources_name_the_external_data_a_cache_must_hash(tmp_path):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from kit.models.onnx_file import onnx_sources

    single = relu_model(tmp_path, ["batch", 3])
    assert onnx_sources(single) == (single,)
    # 'location' as bytes of a weight, no external tensor: the graph is read, nothing added
    named = tmp_path / "named.onnx"
    weight = numpy_helper.from_array(np.frombuffer(b"location", dtype=np.uint8).copy(), "w")
    save_graph(
        named,
        [helper.make_node("Identity", ["w"], ["y"])],
        [],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [8])],
        [weight],
    )
    assert onnx_sources(named) == (named,)
    external = tmp_path / "ext.onnx"
    proto = onnx.load(str(named))
    onnx.save(
        proto, str(external), save_as_external_data=True, location="ext.bin", size_threshold=0
    )
    assert onnx_sources(external) == (external, tmp_path / "ext.bin")
