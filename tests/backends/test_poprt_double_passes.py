"""The double's emulation of ByteMLPerf's pattern passes (tests/poprt_double/poprt/passes.py):
`insert_attention_mask` and `remove_input_cast` fire on the exact patterns PopRT's pass docs name
and on nothing else, so a kit export that loses the pattern shows as a pass that did not fire."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kit.backends import BackendConfig
from kit.backends.ipu import IpuBackend
from kit.backends.ipu import backend as ipu_mod
from kit.backends.ipu.graph import check_passes, not_comparable_reasons
from kit.backends.ipu.poprt_worker.convert import INPUT_CAST, op_types
from tests.ipu_helpers import use_double
from tests.onnx_graphs import where_mask_export

FLOAT_MIN = float(np.finfo(np.float32).min)
B, S, D = 2, 6, 4


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name)
    )


def mask_graph(how: str) -> onnx.ModelProto:
    """softmax(x x^T + mask) x, the additive mask made from input `attention_mask` [B, S] (int64):
    `chain` as ByteMLPerf's exports and the kit's wrappers (Unsqueeze-Unsqueeze-Cast-Sub(1 -
    m)-Mul(min)), `reshape` the same through one Reshape, `where` as transformers' own code
    (Equal/Where), and near misses of the chain: `two_minus` (Sub 2 - m), `small_scale` (Mul by -1),
    `shared` (the Cast also read elsewhere)."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["s3"]),
        helper.make_node("Unsqueeze", ["s3"], ["scores"], axes=[1]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, D])]
    if how == "where":
        nodes += [
            _const("zero_i", np.array(0, np.int64)),
            _const("min", np.array(FLOAT_MIN, np.float32)),
            _const("zero_f", np.array(0.0, np.float32)),
            helper.make_node("Equal", ["attention_mask", "zero_i"], ["pad"]),
            helper.make_node("Where", ["pad", "min", "zero_f"], ["m2"]),
            helper.make_node("Unsqueeze", ["m2"], ["mask"], axes=[1, 2]),
        ]
    else:
        if how == "reshape":
            nodes += [
                _const("shape", np.array([B, 1, 1, S], np.int64)),
                helper.make_node("Reshape", ["attention_mask", "shape"], ["m4"]),
            ]
        else:
            nodes += [
                helper.make_node("Unsqueeze", ["attention_mask"], ["m3"], axes=[1]),
                helper.make_node("Unsqueeze", ["m3"], ["m4"], axes=[2]),
            ]
        nodes += [
            helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
            _const("one", np.array(2.0 if how == "two_minus" else 1.0, np.float32)),
            helper.make_node("Sub", ["one", "mf"], ["inv"]),
            _const("scale", np.array(-1.0 if how == "small_scale" else FLOAT_MIN, np.float32)),
            helper.make_node("Mul", ["inv", "scale"], ["mask"]),
        ]
        if how == "shared":
            nodes.append(helper.make_node("Identity", ["mf"], ["mask_as_float"]))
            outputs.append(
                helper.make_tensor_value_info("mask_as_float", TensorProto.FLOAT, [B, 1, 1, S])
            )
    nodes += [
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p4"], axis=3),
        helper.make_node("Squeeze", ["p4"], ["p"], axes=[1]),
        helper.make_node("MatMul", ["p", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mask",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, S]),
        ],
        outputs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    cast = {"tensor(int32)": np.int32, "tensor(float16)": np.float16}
    return session.run(None, {k: v.astype(cast.get(types[k], v.dtype)) for k, v in feeds.items()})


def mask_feeds(mask_values=None) -> dict[str, np.ndarray]:
    mask = np.ones((B, S), np.int64) if mask_values is None else np.asarray(mask_values, np.int64)
    if mask_values is None:
        mask[1, 4:] = 0
    return {
        "x": np.random.RandomState(0).standard_normal((B, S, D)).astype(np.float32),
        "attention_mask": mask,
    }


def convert(poprt, model, passes, precision="fp32"):
    return poprt.converter.Converter(
        input_shape={"x": [B, S, D], "attention_mask": [B, S]},
        precision=precision,
        used_passes=passes,
    ).convert(model)


@pytest.mark.parametrize("how", ["chain", "reshape"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_insert_attention_mask_rewrites_the_chain_into_cast_attention_mask(poprt, how, precision):
    model = mask_graph(how)
    without, with_ = (
        convert(poprt, model, [], precision),
        convert(poprt, model, ["insert_attention_mask"], precision),
    )
    ops = op_types(with_)
    # Cast -> AttentionMask
    assert ops["AttentionMask"] == 1 and "Sub" not in ops and ops.get(INPUT_CAST) == 1
    assert op_types(without).get("AttentionMask", 0) == 0
    check = check_passes(
        ["insert_attention_mask"], ops, {"insert_attention_mask": op_types(without)}
    )
    assert check["insert_attention_mask"]["applied"] == "yes"
    feeds = mask_feeds()
    tol = 1e-5 if precision == "fp32" else 2e-2
    got, want = run(with_, feeds)[0].astype(np.float32), run(model, feeds)[0]
    np.testing.assert_allclose(got[0], want[0], atol=tol)  # padded positions' outputs are no one's
    np.testing.assert_allclose(got[1, :4], want[1, :4], atol=tol)


def test_the_attention_mask_keeps_packed_samples_apart(poprt):
    """A row holding two samples (mask 1 1 1 2 2 0, as the PackRunner lays them out): each sample
    attends to itself only, as when run alone."""
    with_ = convert(poprt, mask_graph("chain"), ["insert_attention_mask"])
    feeds = mask_feeds([[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 1, 1]])
    packed = run(with_, feeds)[0]
    alone = run(
        mask_graph("chain"),
        {
            "x": feeds["x"][[0, 0]],
            "attention_mask": np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0]]),
        },
    )[0]
    np.testing.assert_allclose(packed[0, :3], alone[0, :3], atol=1e-5)
    np.testing.assert_allclose(packed[0, 3:5], alone[1, 3:5], atol=1e-5)
    with np.errstate(all="ignore"):  # the plain graph reads 2 as a 1/0 mask: the samples mix
        plain = run(convert(poprt, mask_graph("chain"), []), feeds)[0]
    assert not np.allclose(plain[0, :3], alone[0, :3], atol=1e-3)


@pytest.mark.parametrize("how", ["where", "two_minus", "small_scale", "shared"])
def test_insert_attention_mask_leaves_any_other_mask_as_it_is(poprt, how):
    """A mask built another way (transformers' Equal/Where) or a near miss of the chain: no
    AttentionMask, so the kit's check says the pass did not fire and gives the reason."""
    model = mask_graph(how)
    without, with_ = convert(poprt, model, []), convert(poprt, model, ["insert_attention_mask"])
    assert op_types(with_) == op_types(without) and "AttentionMask" not in op_types(with_)
    check = check_passes(
        ["insert_attention_mask"], op_types(with_), {"insert_attention_mask": op_types(without)}
    )
    assert check["insert_attention_mask"]["applied"] == "no"
    reasons = not_comparable_reasons(check)
    assert reasons == [
        "not comparable: ByteMLPerf's pass 'insert_attention_mask' (Reshape-Cast-Sub-Mul replaced "
        "with Cast-AttentionMask) did not fire on the kit's export (looked for an AttentionMask op)"
    ]


def ids_graph(how: str) -> onnx.ModelProto:
    """Token ids in a float input cast to int32 for an embedding Gather (`gather`, roformer as
    ByteMLPerf exported it), the same input also compared (`also_equal`, the kit's Keras export),
    or int64 ids (`int64`)."""
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(10, 2), "E")
    kind = TensorProto.INT64 if how == "int64" else TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["tok"], ["toki"], to=TensorProto.INT32),
        helper.make_node("Gather", ["E", "toki"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, 3, 2])]
    if how == "also_equal":
        nodes += [
            _const("zero", np.array(0.0, np.float32)),
            helper.make_node("Equal", ["tok", "zero"], ["pad"]),
        ]
        outputs.append(helper.make_tensor_value_info("pad", TensorProto.BOOL, [B, 3]))
    graph = helper.make_graph(
        nodes, "ids", [helper.make_tensor_value_info("tok", kind, [B, 3])], outputs, [table]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("how, fired", [("gather", True), ("also_equal", False), ("int64", False)])
def test_remove_input_cast_only_on_a_float_input_read_by_cast_int32_gather(poprt, how, fired):
    model = ids_graph(how)
    conv = [
        poprt.converter.Converter(input_shape={"tok": [B, 3]}, used_passes=passes).convert(model)
        for passes in ([], ["remove_input_cast"])
    ]
    check = check_passes(
        ["remove_input_cast"], op_types(conv[1]), {"remove_input_cast": op_types(conv[0])}
    )
    assert check["remove_input_cast"]["applied"] == ("yes" if fired else "no")
    if fired:
        assert conv[1].graph.input[0].type.tensor_type.elem_type == TensorProto.INT32
        assert op_types(conv[1]).get(INPUT_CAST, 0) == 0
    ids = np.array([[1, 2, 3], [4, 5, 0]])
    feeds = {"tok": ids.astype(np.int64 if how == "int64" else np.float32)}
    for got, want in zip(run(conv[1], feeds), run(model, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------- the kit's own exports, through the IPU backend


@pytest.fixture(scope="module")
def exports():
    from kit.models import export_model

    return {
        name: export_model(name, small=True, opset=IpuBackend.export_opset)
        for name in ("bert-torch-fp32", "albert-torch-fp32", "roberta-torch-fp32")
    }


def load(monkeypatch, tmp_path, model):
    use_double(monkeypatch)
    ipu_mod._AVAILABILITY.clear()
    return IpuBackend().load(
        model, BackendConfig("fp16", "ipu", options={"cache_dir": str(tmp_path)}), 1
    )


@pytest.mark.parametrize("name", ["bert-torch-fp32", "albert-torch-fp32", "roberta-torch-fp32"])
def test_the_kits_bert_family_exports_have_insert_attention_mask_fire(
    monkeypatch, tmp_path, exports, name
):
    session = load(monkeypatch, tmp_path, exports[name])
    try:
        d = session.description
    finally:
        session.close()
    assert d["passes"]["insert_attention_mask"]["applied"] == "yes"
    assert not any("insert_attention_mask" in n for n in d.get("notes", []))
    assert d["pack_check"]["samples_kept_apart"] is True and not session.isolate


def test_an_export_that_loses_the_mask_chain_stays_not_comparable_with_the_reason(
    monkeypatch, tmp_path, exports
):
    session = load(monkeypatch, tmp_path, where_mask_export(exports["bert-torch-fp32"], tmp_path))
    try:
        d = session.description
    finally:
        session.close()
    assert d["passes"]["insert_attention_mask"]["applied"] == "no" and d["comparable"] is False
    assert any(
        n.startswith("not comparable: ByteMLPerf's pass 'insert_attention_mask'")
        and "did not fire" in n
        for n in d["notes"]
    )
    # without the AttentionMask the packed samples mix, so run() keeps sending them one per pack
    assert d["pack_check"]["samples_kept_apart"] is False and session.isolate
    assert {"pass_not_fired", "packed_attention"} <= set(d["not_comparable_codes"])
