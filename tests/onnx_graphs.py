"""Tiny ONNX graphs written by the tests (opset 17, IR 10, which this onnxruntime reads)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper


def save_graph(path: Path, nodes, inputs, outputs, initializers=(), opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


#: What ByteMLPerf's exports of BERT-family models do to the 2D mask input, and what its IPU pass
#: `insert_attention_mask` rewrites: (1 - mask[:, None, None, :].float()) * big negative.
MASK_CHAIN = re.compile(r"^((Unsqueeze|Reshape)-)+Cast-Sub-Mul$")


def mask_chain(path: Path, source: str) -> tuple[str, float, float]:
    """The ops that turn `source` (an input or initializer) into an additive mask, as 'A-B-C', with
    the constant the Sub takes the mask from and the one the Mul scales it by."""
    graph = onnx.load(str(path)).graph
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    ops, tensor = [], source
    while (nexts := [n for n in consumers.get(tensor, []) if n.op_type in CHAIN_OPS]) and len(
        ops
    ) < 8:
        ops.append(nexts[0])
        tensor = nexts[0].output[0]
    sub = [n for n in ops if n.op_type == "Sub"]
    mul = [n for n in ops if n.op_type == "Mul"]
    if not (sub and mul):
        return "-".join(n.op_type for n in ops), float("nan"), float("nan")
    return (
        "-".join(n.op_type for n in ops),
        constant(graph, sub[0].input[0]),
        constant(graph, next(i for i in mul[0].input if i != sub[0].output[0])),
    )


CHAIN_OPS = {"Unsqueeze", "Reshape", "Slice", "Cast", "Sub", "Mul"}


def constant(graph, name: str) -> float:
    for node in graph.node:
        if node.output[0] == name and node.op_type == "Constant":
            return float(numpy_helper.to_array(node.attribute[0].t).reshape(-1)[0])
    init = next(i for i in graph.initializer if i.name == name)
    return float(numpy_helper.to_array(init).reshape(-1)[0])


def where_mask_export(model, tmp_path: Path):
    """The same export with its mask chain's Sub-Mul rebuilt as Equal/Where (transformers' own
    mask code): the pattern lost, as a change of exporter could lose it."""
    graph = onnx.load(str(model.onnx_path))
    nodes = list(graph.graph.node)
    sub = next(n for n in nodes if n.op_type == "Sub" and n.input[1].startswith("/Cast"))
    mul = next(n for n in nodes if n.op_type == "Mul" and sub.output[0] in n.input)
    scale = next(i for i in mul.input if i != sub.output[0])
    at = nodes.index(sub)
    new = [
        helper.make_node(
            "Constant",
            [],
            ["where_zero"],
            value=numpy_helper.from_array(np.float32(0.0), "where_zero"),
        ),
        helper.make_node("Equal", [sub.input[1], "where_zero"], ["where_pad"]),
        helper.make_node("Where", ["where_pad", scale, "where_zero"], list(mul.output)),
    ]
    for node in (sub, mul):
        graph.graph.node.remove(node)
    for i, node in enumerate(new):
        graph.graph.node.insert(at + i, node)
    path = tmp_path / Path(model.onnx_path).name
    onnx.save(graph, str(path))
    return dataclasses.replace(model, onnx_path=path)
