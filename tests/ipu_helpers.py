"""Shared by the IPU tests: a tiny ONNX model and the environment that puts the poprt double on
path."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DOUBLE = Path(__file__).parent / "poprt_double"
# The double's emulated IPUs for this test process (a C600 has one): its own lock folder, so tests
# running at the same time elsewhere on the machine never share a device, and tiny delays.
DOUBLE_STATE = tempfile.mkdtemp(prefix="kit-poprt-double-")
FAST_DOUBLE = {
    "KIT_POPRT_DOUBLE_STATE": DOUBLE_STATE,
    "KIT_POPRT_DOUBLE_ATTACH_S": "0.01",
    "KIT_POPRT_DOUBLE_ATTACH_WAIT_S": "0.1",
    "KIT_POPRT_DOUBLE_HANG_S": "0.3",
    # the double's measured memory stays out of the user's outputs/cache
    "KIT_STEP_PEAKS": os.path.join(DOUBLE_STATE, "step_peaks.json"),
}
W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
B = np.array([0.5, -1.0, 0.25], dtype=np.float32)


def tiny_model(path: Path, opset: int = 11) -> Path:
    """y = relu(x @ W + b) (float) and z = 2 * float(ids) (int64 input), batch axis dynamic; at
    ByteMLPerf's opset 11 unless asked (at 17 its Add-14 cannot go down to PopRT's opset 11)."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["xwb"]),
        helper.make_node("Relu", ["xwb"], ["y"]),
        helper.make_node("Cast", ["ids"], ["idsf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["idsf", "idsf"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3]),
        ],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def tiny_reference(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.maximum(inputs["x"] @ W + B, 0), 2 * inputs["ids"].astype(np.float32)]


TINY_INPUTS = [
    {"name": "x", "shape": [1, 4], "dtype": "float32", "batched": True, "low": -1.0, "high": 1.0},
    {"name": "ids", "shape": [1, 3], "dtype": "int64", "batched": True, "low": 0, "high": 100},
]


def double_env(with_double: bool = True) -> dict:
    env = dict(os.environ)
    parts = [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and "poprt_double" not in p
    ]
    env["PYTHONPATH"] = os.pathsep.join(([str(DOUBLE)] if with_double else []) + parts)
    env["KIT_IPU_PYTHON"] = sys.executable
    for key, value in FAST_DOUBLE.items():
        env.setdefault(key, value)
    return env


def use_double(monkeypatch, with_double: bool = True) -> None:
    """Point the kit's IPU backend at the poprt double (fast delays) for one test."""
    for key, value in double_env(with_double).items():
        if key in ("PYTHONPATH", "KIT_IPU_PYTHON", "KIT_STEP_PEAKS") or key.startswith(
            "KIT_POPRT_DOUBLE"
        ):
            monkeypatch.setenv(key, value)
