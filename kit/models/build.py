"""Build a zoo entry and export it to ONNX, verified against the framework's own output.

Each framework (torch, tensorflow) has an `Exporter`: how to write the ONNX file, how to run the
framework model for the reference output, how to count parameters, and which tool versions key the
cache. The batch axis stays dynamic.
"""

from __future__ import annotations

import gc
import importlib.metadata
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np

from kit.cache import building, commit
from kit.errors import CorruptModel
from kit.measure.memory import check_memory, release_freed_memory
from kit.models.flops import flops_split
from kit.models.spec import (
    ExportedModel,
    Framework,
    InputSpec,
    ModelEntry,
    WeightsInfo,
    make_inputs,
)
from kit.registry import Registry

FP32_BYTES = 4  # an fp32 ONNX file is ~4 bytes per parameter: the memory check's size estimate


@dataclass(frozen=True, kw_only=True)
class Exporter:
    """What the export pipeline needs to know about one framework.

    `child_env` is set in the child process that runs a full-size export (see export_child).
    `reference_first`: run the framework's reference before exporting, so the model can be freed
    before the ONNX file is checked (TensorFlow keeps the run's memory, so it runs after).
    """

    export: Callable[[object, Path, tuple[InputSpec, ...], tuple[str, ...], int], None]
    run: Callable[[object, dict[str, np.ndarray], tuple[InputSpec, ...]], list[np.ndarray]]
    params: Callable[[object], int]
    versions: Callable[[], list[str]]
    reference: str
    child_env: Mapping[str, str] = field(default_factory=dict)
    reference_first: bool = True


EXPORTERS: Registry[Exporter] = Registry("exporter framework")


def build_export(
    entry: ModelEntry,
    weights: WeightsInfo,
    weights_path: Path | None,
    *,
    small: bool,
    seed: int,
    opset: int,
    onnx_path: Path,
) -> dict:
    """Build the model, check the memory its export needs, export, verify, record; the metadata."""
    exporter = EXPORTERS.get(entry.framework)
    inputs = entry.inputs_for(small)
    started = time.perf_counter()
    model = entry.build(small=small, weights_dir=weights_path, seed=seed)
    params = exporter.params(model)
    check_memory(f"export-{entry.framework}", params * FP32_BYTES, f"exporting {entry.name}")
    feeds = make_inputs(inputs, 2, seed=1)
    reference = exporter.run(model, feeds, inputs) if exporter.reference_first else None
    with building(onnx_path) as tmp:
        exporter.export(model, tmp, inputs, entry.outputs, opset)
        export_s = time.perf_counter() - started
        if reference is None:
            reference = exporter.run(model, feeds, inputs)
        del model  # the framework's copy of the weights is not needed to check the file
        release_freed_memory()
        verification = verify(tmp, feeds, reference, exporter.reference)
        verification["export_seconds"] = round(export_s, 2)
        release_freed_memory()
        exported = ExportedModel(
            name=entry.name,
            onnx_path=onnx_path,
            inputs=inputs,
            outputs=entry.outputs,
            weights=weights,
            params=params,
            opset=opset,
            small=small,
            verification=verification,
            framework=entry.framework,
            task=entry.task,
        )
        exported.flops_per_sample, exported.flops_shared_per_call = flops_or_none(tmp, inputs)
        return commit(tmp, onnx_path, exported.to_dict())


def verify(
    onnx_path: Path, feeds: dict[str, np.ndarray], reference: list[np.ndarray], reference_name: str
) -> dict:
    """ONNX checker, then ORT vs the framework's outputs on the same seeded inputs (batch 2)."""
    import onnx
    import onnxruntime as ort

    try:
        onnx.checker.check_model(str(onnx_path))
    except Exception as exc:  # noqa: BLE001 - onnx raises several types
        raise CorruptModel(f"exported ONNX for {onnx_path.name} fails the checker: {exc}") from exc
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_prepacking", "1")  # no second weight copy
    got = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    diff = max(
        float(np.max(np.abs(r.astype(np.float64) - g))) for r, g in zip(reference, got, strict=True)
    )
    return {"checker": "passed", "reference": reference_name, "ort_max_abs_diff": diff}


def flops_or_none(onnx_path: Path, inputs: tuple[InputSpec, ...]) -> tuple[float | None, float]:
    """(FLOPs per sample, FLOPs shared by each call) from the graph; (None, 0.0) if it cannot
    say."""
    try:
        return flops_split(onnx_path, inputs)
    except Exception:  # noqa: BLE001 - a FLOP count must never fail an export
        return None, 0.0


# --- torch ---------------------------------------------------------------------------------


def export_torch(
    model, path: Path, inputs: tuple[InputSpec, ...], outputs: tuple[str, ...], opset: int
) -> None:
    """Legacy TorchScript exporter (2-3x faster than dynamo here), batch axis dynamic."""
    import torch

    model.eval()
    sample = make_inputs(inputs, 1)
    args = tuple(torch.from_numpy(sample[i.name]) for i in inputs)
    dynamic = {i.name: {0: "batch"} for i in inputs if i.batched}
    dynamic.update({o: {0: "batch"} for o in outputs})
    with torch.inference_mode():
        torch.onnx.export(
            model,
            args,
            str(path),
            input_names=[i.name for i in inputs],
            output_names=list(outputs),
            dynamic_axes=dynamic,
            opset_version=opset,
            dynamo=False,
        )
    keep_unused_inputs(path, inputs)
    if opset < INTEGER_CLIP_OPSET:
        clip_integers_as_floats(path)


#: Clip takes integer tensors from opset 12; torch still exports an integer clamp (DeBERTa's
#: relative positions) as Clip at opset 11, which no runtime accepts.
INTEGER_CLIP_OPSET = 12


def clip_integers_as_floats(path: Path) -> int:
    """Each Clip of an integer tensor becomes Cast(float) -> Clip -> Cast(back), exact for the small
    integers clamped here (|x| < 2**24); returns how many were rewritten."""
    import onnx
    from onnx import TensorProto, helper

    proto = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(proto).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.value_info, *inferred.input)}
    types.update({i.name: i.data_type for i in proto.graph.initializer})
    graph, rewritten = proto.graph, 0
    for node in [n for n in graph.node if n.op_type == "Clip"]:
        kind = types.get(node.input[0], TensorProto.FLOAT)
        if kind in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE):
            continue
        at = list(graph.node).index(node)
        casts = [
            helper.make_node(
                "Cast", [name], [f"{name}__{node.name}_as_float"], to=TensorProto.FLOAT
            )
            for name in node.input
            if name
        ]
        node.input[:] = [f"{name}__{node.name}_as_float" if name else "" for name in node.input]
        back = helper.make_node("Cast", [f"{node.output[0]}__as_float"], [node.output[0]], to=kind)
        node.output[0] = f"{node.output[0]}__as_float"
        for offset, cast in enumerate(casts):
            graph.node.insert(at + offset, cast)
        graph.node.insert(at + len(casts) + 1, back)
        rewritten += 1
    if rewritten:
        onnx.save(proto, str(path))
    return rewritten


def keep_unused_inputs(path: Path, inputs: tuple[InputSpec, ...]) -> None:
    """Declare inputs the tracer dropped (DeBERTa ignores token types) so feeds stay uniform."""
    import onnx

    proto = onnx.load(str(path))
    present = {v.name for v in proto.graph.input}
    missing = [i for i in inputs if i.name not in present]
    if not missing:
        return
    for i in missing:
        dims = ["batch" if i.batched else i.shape[0], *i.shape[1:]]
        proto.graph.input.append(
            onnx.helper.make_tensor_value_info(
                i.name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(i.dtype)), dims
            )
        )
    onnx.save(proto, str(path))


def run_torch(
    model, feeds: dict[str, np.ndarray], inputs: tuple[InputSpec, ...]
) -> list[np.ndarray]:
    import torch

    with torch.inference_mode():
        out = model(*[torch.from_numpy(feeds[i.name]) for i in inputs])
    out = (
        [out]
        if isinstance(out, torch.Tensor)
        else list(out.values() if isinstance(out, dict) else out)
    )
    return [o.float().numpy() for o in out]


def installed_version(*distributions: str) -> str:
    """Version of the first installed distribution, without importing it (TensorFlow takes
    seconds)."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "absent"


def torch_versions() -> list[str]:
    return [f"torch-{installed_version('torch')}"]


def count_torch_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


EXPORTERS.register(
    Framework.TORCH,
    Exporter(
        export=export_torch,
        run=run_torch,
        params=count_torch_params,
        versions=torch_versions,
        reference="torch fp32 eager",
    ),
)


# --- tensorflow / keras ----------------------------------------------------------------------

TF_DTYPES = {
    "float32": "float32",
    "int64": "int64",
    "int32": "int32",
    "bool": "bool",
    "float16": "float16",
}


def export_keras(
    model, path: Path, inputs: tuple[InputSpec, ...], outputs: tuple[str, ...], opset: int
) -> None:
    """tf2onnx.convert.from_keras with a None batch dim, then the published input/output names.

    `large_model=True` keeps the weights out of the TensorFlow graph tf2onnx optimises (one copy,
    no grappler pass over them); they are put back into the single .onnx file here. With the
    pure-Python protobuf (set in the export's child process) the ONNX protos share the weights'
    bytes instead of copying them on every optimiser pass: 17 GB -> a few GB for RoFormer-base.
    """
    import tensorflow as tf
    import tf2onnx

    signature = [
        tf.TensorSpec(
            (None, *i.shape[1:]) if i.batched else i.shape,
            TF_DTYPES[i.dtype],
            name=i.name.split(":")[0],
        )
        for i in inputs
    ]
    # tf2onnx 1.17's large-model path still calls np.product, which numpy 2 removed
    with mock.patch.object(np, "product", np.prod, create=True):
        proto, storage = tf2onnx.convert.from_keras(
            model, input_signature=signature, opset=opset, large_model=True
        )
    inline_external_tensors(proto, storage.name_to_tensor_data if storage else {})
    del storage
    gc.collect()  # TensorFlow's frozen graph and tf2onnx's graph sit in reference cycles
    rename_io(proto, [i.name for i in inputs], list(outputs))
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def inline_external_tensors(proto, data: Mapping[str, bytes]) -> None:
    """Move tf2onnx's external tensor data back into the model (a single-file ONNX model)."""
    import onnx

    for tensor in graph_tensors(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = {e.key: e.value for e in tensor.external_data}["location"]
        tensor.raw_data = data[location]
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT


def graph_tensors(graph) -> Iterator:
    """Every TensorProto of a graph: initializers and tensor attributes, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from graph_tensors(sub)


def rename_io(proto, input_names: list[str], output_names: list[str]) -> None:
    """Give graph inputs/outputs the published names (tf2onnx derives its own from TF tensors)."""
    graph = proto.graph
    by_stem = {n.split(":")[0]: n for n in input_names}
    mapping = {
        v.name: by_stem[v.name.split(":")[0]]
        for v in graph.input
        if v.name.split(":")[0] in by_stem
    }
    mapping.update({v.name: new for v, new in zip(graph.output, output_names, strict=True)})
    for value in [*graph.input, *graph.output]:
        value.name = mapping.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]


def run_keras(
    model, feeds: dict[str, np.ndarray], inputs: tuple[InputSpec, ...]
) -> list[np.ndarray]:
    out = model([feeds[i.name] for i in inputs], training=False)
    out = out if isinstance(out, list | tuple) else [out]
    return [np.asarray(o, dtype=np.float32) for o in out]


def tf_versions() -> list[str]:
    return [
        f"tensorflow-{installed_version('tensorflow', 'tensorflow-cpu', 'tensorflow-intel')}",
        f"tf2onnx-{installed_version('tf2onnx')}",
    ]


def count_keras_params(model) -> int:
    return int(model.count_params())


EXPORTERS.register(
    Framework.TENSORFLOW,
    Exporter(
        export=export_keras,
        run=run_keras,
        params=count_keras_params,
        versions=tf_versions,
        reference="keras (tensorflow) fp32",
        # oneDNN's TensorFlow kernels hold caches through the conversion: RoFormer's export peaked
        # at 3.60 GB with them and 3.32 GB without (3 x file + 2 GB = 3.49); the graph written is
        # the same
        child_env={
            "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_ENABLE_ONEDNN_OPTS": "0",
        },
        reference_first=False,
    ),
)
