"""The few PopRT graph passes the double emulates, so that their effect on a graph's op counts is
real in the tests: two of PopRT's own default passes (`eliminate_nop_cast`, `replace_div_with_mul`,
applied unless in `skip_passes`) and one of ByteMLPerf's `used_passes` (`remove_input_cast`).
Each rewrites the graph in place and keeps it runnable under ONNX Runtime."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper, numpy_helper

INTEGER_TYPES = (TensorProto.INT32, TensorProto.INT64)


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
        graph.node.insert(at, helper.make_node("Mul", [node.input[0], name], list(node.output), name=node.name))
        graph.node.remove(node)


def remove_input_cast(model):
    """input -> Cast(int) -> Gather indices becomes input(int) -> Gather (PopRT: remove_input_cast)."""
    graph = model.graph
    inputs = {i.name: i for i in graph.input}
    for node in [n for n in graph.node if n.op_type == "Cast" and n.input[0] in inputs]:
        readers = [n for n in graph.node if node.output[0] in n.input]
        if _cast_to(node) not in INTEGER_TYPES or not readers or not all(
                r.op_type == "Gather" and list(r.input).index(node.output[0]) == 1 for r in readers):
            continue
        inputs[node.input[0]].type.tensor_type.elem_type = _cast_to(node)
        _rewire(graph, node.output[0], node.input[0])
        graph.node.remove(node)


DEFAULT_PASSES = {"eliminate_nop_cast": eliminate_nop_cast, "replace_div_with_mul": replace_div_with_mul}
USED_PASSES = {"remove_input_cast": remove_input_cast}
