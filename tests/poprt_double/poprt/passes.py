"""The few PopRT graph passes the double emulates, so that their effect on a graph's op counts is
real in the tests: two of PopRT's own default passes (`eliminate_nop_cast`, `replace_div_with_mul`,
applied unless in `skip_passes`) and two of ByteMLPerf's `used_passes` (`remove_input_cast`,
`insert_attention_mask`), each only on the exact pattern PopRT's pass docs name (passes.html):
a graph without it is left as it is, as the pass finds nothing there.
Each rewrites the graph in place and keeps it runnable under ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)
GRAPHCORE = "ai.graphcore"
# A multiplier at least this negative makes a Sub-Mul an additive mask (dtype minimum, -10000...).
MASK_SCALE_AT_MOST = -1e4


def _cast_to(node):
    return next(a.i for a in node.attribute if a.name == "to")


def _types(model):
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.value_info, *inferred.input)}
    types.update({i.name: i.data_type for i in model.graph.initializer})
    return types


def _rewire(graph, old, new):
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]


def eliminate_nop_cast(model):
    """A Cast to the type its input already has is removed (PopRT: eliminate_nop_cast)."""
    graph, types = model.graph, _types(model)
    outputs = {o.name for o in graph.output}
    for node in [n for n in graph.node if n.op_type == "Cast"]:
        if types.get(node.input[0]) == _cast_to(node) and node.output[0] not in outputs:
            _rewire(graph, node.output[0], node.input[0])
            graph.node.remove(node)


def replace_div_with_mul(model):
    """Div by a float constant becomes Mul by its reciprocal (PopRT: replace_div_with_mul)."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    for node in [n for n in graph.node if n.op_type == "Div" and n.input[1] in inits]:
        value = numpy_helper.to_array(inits[node.input[1]])
        if value.dtype.kind != "f":
            continue
        name = node.input[1] + "__reciprocal"
        if name not in inits:
            inits[name] = numpy_helper.from_array((1 / value).astype(value.dtype), name)
            graph.initializer.append(inits[name])
        at = list(graph.node).index(node)
        graph.node.insert(
            at, helper.make_node("Mul", [node.input[0], name], list(node.output), name=node.name)
        )
        graph.node.remove(node)


def _readers(graph, name):
    return [n for n in graph.node if name in n.input]


def remove_input_cast(model):
    """input(fp16) -> Cast(int32) -> Gather indices becomes input(int32) -> Gather (PopRT:
    remove_input_cast). Only where the float input is read by nothing else than such Casts (a
    Keras export whose token input also feeds an Equal or an Add keeps its Cast)."""
    graph = model.graph
    for value in list(graph.input):
        readers = _readers(graph, value.name)
        if (
            value.type.tensor_type.elem_type not in FLOAT_TYPES
            or not readers
            or not all(
                r.op_type == "Cast"
                and _cast_to(r) == TensorProto.INT32
                and _feeds_gather_indices(graph, r)
                for r in readers
            )
        ):
            continue
        value.type.tensor_type.elem_type = TensorProto.INT32
        for cast in readers:
            _rewire(graph, cast.output[0], value.name)
            graph.node.remove(cast)


def _feeds_gather_indices(graph, cast):
    readers = _readers(graph, cast.output[0])
    return bool(readers) and all(
        r.op_type == "Gather" and list(r.input).index(cast.output[0]) == 1 for r in readers
    )


def _constant(graph, name):
    """The value of a Constant node's output or an initializer, else None."""
    for init in graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return numpy_helper.to_array(node.attribute[0].t)
    return None


def _mask_chain(graph, source):
    """The nodes of `source` -> (Unsqueeze|Reshape)+ -> Cast(float) -> Sub(1 - x) -> Mul(big
    negative), each read only by the next, or None: the pattern insert_attention_mask rewrites."""
    chain, tensor = [], source
    while not chain or chain[-1].op_type in ("Unsqueeze", "Reshape"):
        readers = _readers(graph, tensor)
        if len(readers) != 1 or readers[0].input[0] != tensor:
            return None
        chain.append(readers[0])
        tensor = readers[0].output[0]
    cast = chain[-1]
    if len(chain) < 2 or cast.op_type != "Cast" or _cast_to(cast) not in FLOAT_TYPES:
        return None
    sub = _readers(graph, cast.output[0])
    if len(sub) != 1 or sub[0].op_type != "Sub" or sub[0].input[1] != cast.output[0]:
        return None
    one = _constant(graph, sub[0].input[0])
    if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0:
        return None
    mul = _readers(graph, sub[0].output[0])
    if len(mul) != 1 or mul[0].op_type != "Mul":
        return None
    scale_name = next((i for i in mul[0].input if i != sub[0].output[0]), None)
    scale = _constant(graph, scale_name) if scale_name else None
    if scale is None or scale.size != 1 or float(scale.reshape(-1)[0]) > MASK_SCALE_AT_MOST:
        return None
    return [*chain, sub[0], mul[0]], scale_name


def attention_mask_function(opset):
    """The double's `ai.graphcore::AttentionMask(mask, scale)`: [B, S] sample indices (0 padding,
    k for the k-th sample of a packed row, 1 for an unpacked one) -> [B, 1, S, S] additive mask,
    0 where query and key belong to the same sample, `scale` elsewhere, as Graphcore's AttentionMask
    op (|index_q - index_k| sent to the mask value). Type-generic, so fp16 conversion keeps it
    valid."""
    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["q_shape"],
            value=numpy_helper.from_array(np.array([0, 1, -1, 1], np.int64)),
        ),
        helper.make_node(
            "Constant",
            [],
            ["k_shape"],
            value=numpy_helper.from_array(np.array([0, 1, 1, -1], np.int64)),
        ),
        helper.make_node("Reshape", ["mask", "q_shape"], ["q"]),
        helper.make_node("Reshape", ["mask", "k_shape"], ["k"]),
        helper.make_node("Sub", ["q", "k"], ["apart"]),
        helper.make_node("Sign", ["apart"], ["sign"]),
        helper.make_node("Abs", ["sign"], ["other"]),
        helper.make_node("Mul", ["other", "scale"], ["out"]),
    ]
    return helper.make_function(
        GRAPHCORE,
        "AttentionMask",
        ["mask", "scale"],
        ["out"],
        nodes,
        [helper.make_opsetid("", opset)],
    )


def insert_attention_mask(model):
    """Reshape/Unsqueeze-Cast-Sub-Mul on a graph input replaced with Cast-AttentionMask (PopRT:
    insert_attention_mask), the mask's readers (an Add in each layer) unchanged. A mask built any
    other way (Equal/Where, a mask from a constant) is left as it is."""
    graph = model.graph
    found = [(value.name, _mask_chain(graph, value.name)) for value in graph.input]
    found = [(name, chain) for name, chain in found if chain]
    for name, (chain, scale_name) in found:
        cast, sub, mul = chain[-3], chain[-2], chain[-1]
        cast_out = name + "__attention_mask_cast"
        new = [
            helper.make_node(
                "Cast", [name], [cast_out], to=_cast_to(cast), name=cast.name + "__input"
            ),
            helper.make_node(
                "AttentionMask",
                [cast_out, scale_name],
                list(mul.output),
                domain=GRAPHCORE,
                name=mul.name + "__AttentionMask",
            ),
        ]
        # the chain's other nodes come before its Mul
        at = list(graph.node).index(mul) - (len(chain) - 1)
        for node in chain:
            graph.node.remove(node)
        for offset, node in enumerate(new):
            graph.node.insert(at + offset, node)
        one = [n for n in graph.node if n.op_type == "Constant" and n.output[0] == sub.input[0]]
        if one and not _readers(graph, sub.input[0]):
            graph.node.remove(one[0])
        stale = {o for n in chain for o in n.output}
        kept = [v for v in graph.value_info if v.name not in stale]
        del graph.value_info[:]
        graph.value_info.extend(kept)
    if found and not any(
        f.domain == GRAPHCORE and f.name == "AttentionMask" for f in model.functions
    ):
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        model.functions.append(attention_mask_function(opset))
        if not any(o.domain == GRAPHCORE for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(GRAPHCORE, 1))


DEFAULT_PASSES = {
    "eliminate_nop_cast": eliminate_nop_cast,
    "replace_div_with_mul": replace_div_with_mul,
}
USED_PASSES = {
    "remove_input_cast": remove_input_cast,
    "insert_attention_mask": insert_attention_mask,
}
