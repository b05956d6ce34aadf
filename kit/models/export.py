"""Export a zoo entry to ONNX once, cache it, and verify it against the framework's output.

Each framework (torch, tensorflow) has an `Exporter`: how to write the ONNX file, how to run the
framework model for the reference output, how to count parameters, and which tool versions key the
cache. The batch axis stays dynamic.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit import progress
from kit.errors import CorruptModel
from kit.models.spec import ExportedModel, InputSpec, ModelEntry, WeightsInfo, make_inputs
from kit.paths import cache_dir
from kit.registry import Registry

EXPORT_FORMAT_VERSION = 2  # bump when the export code changes what it writes


@dataclass(frozen=True)
class Exporter:
    """What the export pipeline needs to know about one framework."""

    export: Callable[[object, Path, tuple[InputSpec, ...], tuple[str, ...], int], None]
    run: Callable[[object, dict[str, np.ndarray], tuple[InputSpec, ...]], list[np.ndarray]]
    params: Callable[[object], int]
    versions: Callable[[], list[str]]
    reference: str


EXPORTERS: Registry[Exporter] = Registry("exporter framework")


def cache_key(entry: ModelEntry, weights: WeightsInfo, small: bool, opset: int,
              weights_path: Path | None = None) -> str:
    parts = [entry.name, weights.source, weights.detail, str(small), str(opset),
             *EXPORTERS.get(entry.framework).versions(), f"format-{EXPORT_FORMAT_VERSION}",
             *weights_stamp(weights_path)]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]


def weights_stamp(directory: Path | None) -> list[str]:
    """Name, size and mtime of each weights file, so replacing the weights re-exports."""
    if directory is None:
        return []
    return [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
            for p in sorted(Path(directory).iterdir()) if p.is_file()]


def cache_stem(entry_name: str, small: bool) -> str:
    return f"{entry_name}{'-small' if small else ''}"


def cached_export(entry: ModelEntry, weights: WeightsInfo, weights_path: Path | None, *,
                  small: bool, seed: int, opset: int, directory: Path | None = None) -> ExportedModel:
    """Return the cached export for this key, or build, export, verify and cache it."""
    directory = directory or cache_dir() / "models"
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{cache_stem(entry.name, small)}-{cache_key(entry, weights, small, opset, weights_path)}"
    onnx_path, meta_path = directory / f"{stem}.onnx", directory / f"{stem}.json"
    if onnx_path.exists() and meta_path.exists():
        return exported_from_meta(json.loads(meta_path.read_text()), onnx_path)
    exporter = EXPORTERS.get(entry.framework)
    inputs = entry.inputs_for(small)
    started = time.perf_counter()
    model = entry.build(small=small, weights_dir=weights_path, seed=seed)
    tmp = onnx_path.with_suffix(".tmp.onnx")
    with progress.step(f"exporting {entry.name} to ONNX ({entry.framework}), cached after this"):
        exporter.export(model, tmp, inputs, entry.outputs, opset)
    export_s = time.perf_counter() - started
    verification = verify(exporter, model, tmp, inputs)
    verification["export_seconds"] = round(export_s, 2)
    tmp.replace(onnx_path)
    exported = ExportedModel(
        name=entry.name, onnx_path=onnx_path, inputs=inputs, outputs=entry.outputs,
        weights=weights, params=exporter.params(model), opset=opset, small=small,
        verification=verification, framework=entry.framework, task=entry.task,
    )
    exported.flops_per_sample = flops_or_none(onnx_path, inputs)
    meta_path.write_text(json.dumps(exported.to_dict(), indent=1))
    return exported


def latest_cached_meta(entry_name: str, small: bool = False, directory: Path | None = None) -> dict | None:
    """Metadata of the newest cached export of `entry_name`, without importing any framework."""
    directory = directory or cache_dir() / "models"
    stem = cache_stem(entry_name, small)
    metas = [p for p in directory.glob(f"{stem}-*.json")
             if len(p.stem) == len(stem) + 13 and p.with_suffix(".onnx").exists()]
    if not metas:
        return None
    return json.loads(max(metas, key=lambda p: p.stat().st_mtime).read_text())


def exported_from_meta(meta: dict, onnx_path: Path) -> ExportedModel:
    return ExportedModel(
        name=meta["name"], onnx_path=onnx_path,
        inputs=tuple(InputSpec.from_dict(i) for i in meta["inputs"]),
        outputs=tuple(meta["outputs"]), weights=WeightsInfo.from_dict(meta["weights"]),
        flops_per_sample=meta.get("flops_per_sample"), params=meta.get("params"),
        opset=meta.get("opset"), small=meta.get("small", False),
        dynamic_batch=meta.get("dynamic_batch", True), verification=meta.get("verification", {}),
        framework=meta.get("framework", "onnx"), task=meta.get("task", ""),
    )


def verify(exporter: Exporter, model, onnx_path: Path, inputs: tuple[InputSpec, ...]) -> dict:
    """ONNX checker, then ORT vs the framework on the same seeded inputs at batch 2."""
    import onnx
    import onnxruntime as ort

    try:
        onnx.checker.check_model(str(onnx_path))
    except Exception as exc:  # noqa: BLE001 - onnx raises several types
        raise CorruptModel(f"exported ONNX for {onnx_path.name} fails the checker: {exc}") from exc
    feeds = make_inputs(inputs, 2, seed=1)
    ref = exporter.run(model, feeds, inputs)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    diff = max(float(np.max(np.abs(r.astype(np.float64) - g))) for r, g in zip(ref, got, strict=True))
    return {"checker": "passed", "reference": exporter.reference, "ort_max_abs_diff": diff}


def flops_or_none(onnx_path: Path, inputs: tuple[InputSpec, ...]) -> float | None:
    from kit.models.flops import count_flops_per_sample

    try:
        return count_flops_per_sample(onnx_path, inputs)
    except Exception:  # noqa: BLE001 - a FLOP count must never fail an export
        return None


# --- torch ---------------------------------------------------------------------------------

def export_torch(model, path: Path, inputs: tuple[InputSpec, ...], outputs: tuple[str, ...],
                 opset: int) -> None:
    """Legacy TorchScript exporter (2-3x faster than dynamo here), batch axis dynamic."""
    import torch

    model.eval()
    sample = make_inputs(inputs, 1)
    args = tuple(torch.from_numpy(sample[i.name]) for i in inputs)
    dynamic = {i.name: {0: "batch"} for i in inputs if i.batched}
    dynamic.update({o: {0: "batch"} for o in outputs})
    with torch.inference_mode():
        torch.onnx.export(model, args, str(path), input_names=[i.name for i in inputs],
                          output_names=list(outputs), dynamic_axes=dynamic, opset_version=opset,
                          dynamo=False)
    keep_unused_inputs(path, inputs)


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
        proto.graph.input.append(onnx.helper.make_tensor_value_info(
            i.name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(i.dtype)), dims))
    onnx.save(proto, str(path))


def run_torch(model, feeds: dict[str, np.ndarray], inputs: tuple[InputSpec, ...]) -> list[np.ndarray]:
    import torch

    with torch.inference_mode():
        out = model(*[torch.from_numpy(feeds[i.name]) for i in inputs])
    out = [out] if isinstance(out, torch.Tensor) else list(out.values() if isinstance(out, dict) else out)
    return [o.float().numpy() for o in out]


def torch_versions() -> list[str]:
    import torch

    return [f"torch-{torch.__version__}"]


def count_torch_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


EXPORTERS.register("torch", Exporter(export_torch, run_torch, count_torch_params, torch_versions,
                                     "torch fp32 eager"))


# --- tensorflow / keras ----------------------------------------------------------------------

TF_DTYPES = {"float32": "float32", "int64": "int64", "int32": "int32", "bool": "bool",
             "float16": "float16"}


def export_keras(model, path: Path, inputs: tuple[InputSpec, ...], outputs: tuple[str, ...],
                 opset: int) -> None:
    """tf2onnx.convert.from_keras with a None batch dim, then the published input/output names."""
    import onnx
    import tensorflow as tf
    import tf2onnx

    signature = [tf.TensorSpec((None, *i.shape[1:]) if i.batched else i.shape, TF_DTYPES[i.dtype],
                               name=i.name.split(":")[0]) for i in inputs]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=signature, opset=opset)
    rename_io(proto, [i.name for i in inputs], list(outputs))
    onnx.save(proto, str(path))


def rename_io(proto, input_names: list[str], output_names: list[str]) -> None:
    """Give graph inputs/outputs the published names (tf2onnx derives its own from TF tensors)."""
    graph = proto.graph
    by_stem = {n.split(":")[0]: n for n in input_names}
    mapping = {v.name: by_stem[v.name.split(":")[0]] for v in graph.input if v.name.split(":")[0] in by_stem}
    mapping.update({v.name: new for v, new in zip(graph.output, output_names, strict=True)})
    for value in [*graph.input, *graph.output]:
        value.name = mapping.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]


def run_keras(model, feeds: dict[str, np.ndarray], inputs: tuple[InputSpec, ...]) -> list[np.ndarray]:
    out = model([feeds[i.name] for i in inputs], training=False)
    out = out if isinstance(out, list | tuple) else [out]
    return [np.asarray(o, dtype=np.float32) for o in out]


def tf_versions() -> list[str]:
    import tensorflow as tf
    import tf2onnx

    return [f"tensorflow-{tf.__version__}", f"tf2onnx-{tf2onnx.__version__}"]


def count_keras_params(model) -> int:
    return int(model.count_params())


EXPORTERS.register("tensorflow", Exporter(export_keras, run_keras, count_keras_params, tf_versions,
                                          "keras (tensorflow) fp32"))
