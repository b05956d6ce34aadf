"""Export a zoo entry to ONNX once, cache it, and verify it against the framework's output."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from kit.errors import CorruptModel
from kit.models.spec import ExportedModel, InputSpec, ModelEntry, WeightsInfo, make_inputs
from kit.paths import cache_dir

EXPORT_FORMAT_VERSION = 1  # bump when the export code changes what it writes


def cache_key(entry: ModelEntry, weights: WeightsInfo, small: bool, opset: int) -> str:
    import torch

    parts = [entry.name, weights.source, weights.detail, str(small), str(opset),
             f"torch-{torch.__version__}", f"format-{EXPORT_FORMAT_VERSION}"]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]


def cached_export(entry: ModelEntry, weights: WeightsInfo, weights_path: Path | None, *,
                  small: bool, seed: int, opset: int, directory: Path | None = None) -> ExportedModel:
    """Return the cached export for this key, or build, export, verify and cache it."""
    directory = directory or cache_dir() / "models"
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{entry.name}{'-small' if small else ''}-{cache_key(entry, weights, small, opset)}"
    onnx_path, meta_path = directory / f"{stem}.onnx", directory / f"{stem}.json"
    if onnx_path.exists() and meta_path.exists():
        return exported_from_meta(json.loads(meta_path.read_text()), onnx_path)
    inputs = entry.inputs_for(small)
    started = time.perf_counter()
    model = entry.build(small=small, weights_dir=weights_path, seed=seed)
    tmp = onnx_path.with_suffix(".tmp.onnx")
    export_torch(model, tmp, inputs, entry.outputs, opset)
    export_s = time.perf_counter() - started
    verification = verify_against_torch(model, tmp, inputs)
    verification["export_seconds"] = round(export_s, 2)
    tmp.replace(onnx_path)
    exported = ExportedModel(
        name=entry.name, onnx_path=onnx_path, inputs=inputs, outputs=entry.outputs,
        weights=weights, params=count_params(model), opset=opset, small=small,
        verification=verification, framework=entry.framework, task=entry.task,
    )
    exported.flops_per_sample = flops_or_none(onnx_path, inputs)
    meta_path.write_text(json.dumps(exported.to_dict(), indent=1))
    return exported


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


def verify_against_torch(model, onnx_path: Path, inputs: tuple[InputSpec, ...]) -> dict:
    """ONNX checker, then ORT vs torch on the same seeded inputs at batch 2."""
    import onnx
    import onnxruntime as ort
    import torch

    try:
        onnx.checker.check_model(str(onnx_path))
    except Exception as exc:  # noqa: BLE001 - onnx raises several types
        raise CorruptModel(f"exported ONNX for {onnx_path.name} fails the checker: {exc}") from exc
    feeds = make_inputs(inputs, 2, seed=1)
    with torch.inference_mode():
        ref = model(*[torch.from_numpy(feeds[i.name]) for i in inputs])
    ref = [ref] if isinstance(ref, torch.Tensor) else list(ref.values() if isinstance(ref, dict) else ref)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    diff = max(float(np.max(np.abs(r.float().numpy() - g))) for r, g in zip(ref, got, strict=False))
    return {"checker": "passed", "reference": "torch fp32 eager", "ort_max_abs_diff": diff}


def count_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def flops_or_none(onnx_path: Path, inputs: tuple[InputSpec, ...]) -> float | None:
    try:
        from kit.models.flops import count_flops_per_sample
    except ImportError:
        return None
    return count_flops_per_sample(onnx_path, inputs)
