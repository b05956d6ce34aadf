"""Tiny ONNX graphs written by the tests (opset 17, IR 10, which this onnxruntime reads)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper


def save_graph(path: Path, nodes, inputs, outputs, initializers=(), opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path
