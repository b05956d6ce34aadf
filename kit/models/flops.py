"""FLOPs per sample from an ONNX graph: Conv, MatMul and Gemm, 2 FLOPs per multiply-accumulate.

Shapes come from shape inference with every input fixed at the batch size: ONNX's own (C++, with
data propagation) for the FLOP count, whose few operands it leaves open are read from one ORT run;
ONNX Runtime's symbolic inference (Python, 4x slower on Swin-L, but it follows more of the
Shape/Reshape chains that exporters write) for the traffic estimate, which needs every tensor.
"""

from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np

from kit.models.spec import InputSpec, make_inputs


def count_flops_per_sample(onnx_path: Path, inputs: tuple[InputSpec, ...]) -> float:
    """2 x MACs of every Conv, MatMul and Gemm at batch size 1."""
    return count_flops_per_call(onnx_path, inputs, 1)


def flops_split(onnx_path: Path, inputs: tuple[InputSpec, ...]) -> tuple[float, float]:
    """(FLOPs each sample adds, FLOPs every call does whatever its batch size).

    A call at batch b does shared + b x per_sample. Inputs that are not batched (VideoBERT's 100
    text prompts) are encoded once per call: counting them per sample overstates the work of a
    batch of b by (b - 1) x their FLOPs. With every input batched, shared is 0.
    """
    import onnx

    source = onnx.load(str(onnx_path))  # once: each count works on its own weightless copy
    one = count_flops_per_call(onnx_path, inputs, 1, source)
    if all(i.batched for i in inputs):
        return one, 0.0
    per_sample = count_flops_per_call(onnx_path, inputs, 2, source) - one
    return per_sample, max(one - per_sample, 0.0)


def count_flops_per_call(
    onnx_path: Path, inputs: tuple[InputSpec, ...], batch_size: int, source=None
) -> float:
    """2 x MACs of every Conv, MatMul and Gemm in one call at `batch_size` (`source`: the graph at
    `onnx_path`, already loaded)."""
    import onnx

    model = weightless(source if source is not None else onnx.load(str(onnx_path)))
    fix_input_shapes(model, {i.name: i.shape_for(batch_size) for i in inputs})
    shapes = inferred_shapes(model, symbolic=False)
    counted = [
        (n, COUNTERS[n.op_type](n, shapes)) for n in model.graph.node if n.op_type in COUNTERS
    ]
    if any(flops is None for _, flops in counted):
        shapes.update(measured_shapes(model, counted, shapes, inputs, batch_size))
        counted = [(n, COUNTERS[n.op_type](n, shapes)) for n, _ in counted]
    unresolved = [n.name or n.op_type for n, flops in counted if flops is None]
    if unresolved:
        raise ValueError(
            f"{onnx_path.name}: shape inference left {len(unresolved)} nodes without "
            f"static shapes, e.g. {', '.join(unresolved[:3])}"
        )
    return float(sum(flops for _, flops in counted if flops is not None))


FLOAT_TYPES = (1, 10, 11, 16)  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
WEIGHTLESS_ABOVE = 1024  # elements


def weightless(model):
    """A copy of `model` whose large float initializers are graph inputs of the same type and shape.

    Shapes, hence FLOPs, do not depend on weight values; counting on this copy holds no second
    copy of the weights (shape inference and the measuring session would each make one).
    """
    import onnx

    graph = model.graph
    moved = [
        t
        for t in graph.initializer
        if t.data_type in FLOAT_TYPES and prod(t.dims) > WEIGHTLESS_ABOVE
    ]
    moved_names = {t.name for t in moved}
    light = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    light.graph.name = graph.name
    light.graph.node.extend(graph.node)
    light.graph.input.extend(graph.input)
    light.graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in moved
        if t.name not in {i.name for i in graph.input}
    )
    light.graph.output.extend(graph.output)
    light.graph.value_info.extend(graph.value_info)
    light.graph.initializer.extend(t for t in graph.initializer if t.name not in moved_names)
    return light


def fix_input_shapes(model, shapes: dict[str, tuple[int, ...]]) -> None:
    for value in model.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name], strict=True):
                dim.Clear()
                dim.dim_value = int(size)


def inferred_shapes(model, symbolic: bool = True) -> dict[str, tuple[int, ...]]:
    """name -> static shape for every tensor whose shape inference could resolve: ONNX Runtime's
    symbolic inference (`symbolic`, falling back to ONNX's on failure), or ONNX's alone (faster)."""
    import onnx

    inferred = None
    if symbolic:
        try:
            from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

            inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
        except Exception:  # noqa: BLE001 - fall back to ONNX's own inference
            pass
    model = (
        inferred
        if inferred is not None
        else onnx.shape_inference.infer_shapes(model, data_prop=True)
    )
    shapes = {}
    graph = model.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def measured_shapes(
    model, counted, shapes, inputs: tuple[InputSpec, ...], batch_size: int = 1
) -> dict:
    """Shapes inference left symbolic (Swin's window reshapes), read from one ORT run."""
    import onnx
    import onnxruntime as ort

    wanted = {
        name
        for node, flops in counted
        if flops is None
        for name in [*node.input[:2], node.output[0]]
        if name and name not in shapes
    }
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in sorted(wanted))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.disable_prepacking", "1")  # no second weight copy
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = make_inputs(inputs, batch_size)
    for value in model.graph.input:  # weights made inputs by weightless(): zeros of their shape
        if value.name not in feeds:
            dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            feeds[value.name] = np.zeros(dims, dtype)
    values = session.run(None, feeds)
    return {name: tuple(v.shape) for name, v in zip(sorted(wanted), values, strict=True)}


def _conv(node, shapes) -> float | None:
    out, weight = shapes.get(node.output[0]), shapes.get(node.input[1])
    if out is None or weight is None:
        return None
    return 2.0 * prod(out) * prod(weight[1:])  # weight: [Cout, Cin/groups, k...]


def _matmul(node, shapes) -> float | None:
    a, out = shapes.get(node.input[0]), shapes.get(node.output[0])
    if a is None or out is None:
        return None
    return 2.0 * prod(out) * a[-1]


def _gemm(node, shapes) -> float | None:
    a, out = shapes.get(node.input[0]), shapes.get(node.output[0])
    if a is None or out is None:
        return None
    trans_a = next((attr.i for attr in node.attribute if attr.name == "transA"), 0)
    return 2.0 * prod(out) * (a[0] if trans_a else a[-1])


def _einsum(node, shapes) -> float | None:
    """Two-operand contraction: 2 x the product of every index's size."""
    equation = next(a.s.decode() for a in node.attribute if a.name == "equation").replace(" ", "")
    operands = equation.split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for letters, name in zip(operands, node.input, strict=True):
        shape = shapes.get(name)
        if shape is None or "." in letters:
            return None
        sizes.update(zip(letters, shape, strict=True))
    return 2.0 * prod(sizes.values()) if len(operands) == 2 else 0.0


COUNTERS = {"Conv": _conv, "MatMul": _matmul, "Gemm": _gemm, "Einsum": _einsum}


def count_traffic_per_sample(
    onnx_path: Path, inputs: tuple[InputSpec, ...], batch_size: int = 1
) -> dict:
    """What one call moves, from the graph at batch size 1 (a documented, unfused estimate).

    `weight_elements`: every floating-point initializer (read once per call, so shared by the
    batch's samples); `activation_elements`: every node's non-initializer inputs (read) and outputs
    (written) at batch 1, as if each operator ran alone with no fusion and no cache reuse (an upper
    estimate of the DRAM traffic; fusion and caches move less). `unresolved` counts tensors whose
    shape inference left dynamic (not counted).
    """
    import onnx

    model = onnx.load(str(onnx_path))
    fix_input_shapes(model, {i.name: i.shape_for(batch_size) for i in inputs})
    shapes = inferred_shapes(model)
    initializers = {init.name for init in model.graph.initializer}
    float_types = {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
    }
    weights = sum(
        prod(init.dims) for init in model.graph.initializer if init.data_type in float_types
    )
    constants = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    activations, unresolved = 0, set()
    for node in model.graph.node:
        for name in [*node.input, *node.output]:
            if not name or name in initializers or name in constants:
                continue
            if name in shapes:
                activations += prod(shapes[name])
            else:
                unresolved.add(name)
    return {
        "weight_elements": int(weights),
        "activation_elements": int(activations),
        "unresolved": len(unresolved),
        "method": "unfused estimate at batch 1: floating-point initializers "
        "once per call, every node's activation inputs read and outputs written",
    }
