"""The export cache: one verified ONNX file per model, weights, settings and exporter version,
built in a child process for full-size models (`kit.models.build` does the building)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit import progress
from kit.cache import content_key, entry_problem, read_entry, write_entry
from kit.models.build import EXPORTERS, build_export, flops_or_none
from kit.models.export_child import run_export_child
from kit.models.spec import ExportedModel, InputSpec, ModelEntry, WeightsInfo
from kit.models.zoo import MODELS
from kit.paths import cache_dir

# bump when the export code changes what it writes (4: additive masks, kit.models.hf)
EXPORT_FORMAT_VERSION = 4
#: The ONNX opset a zoo model is exported at unless its backend asks for another
#: (kit.backends.base.Backend.export_opset); part of the export cache key.
DEFAULT_OPSET = 17


def cache_key(
    entry: ModelEntry,
    weights: WeightsInfo,
    small: bool,
    opset: int,
    weights_path: Path | None = None,
) -> str:
    """Hash of the entry, settings, tool versions and the weights files' content."""
    settings = [
        entry.name,
        weights.source,
        weights.detail,
        str(small),
        str(opset),
        *EXPORTERS.get(entry.framework).versions(),
        f"format-{EXPORT_FORMAT_VERSION}",
    ]
    return content_key([weights_path] if weights_path is not None else [], settings)


def cache_stem(entry_name: str, small: bool) -> str:
    return f"{entry_name}{'-small' if small else ''}"


def cached_export(
    entry: ModelEntry,
    weights: WeightsInfo,
    weights_path: Path | None,
    *,
    small: bool,
    seed: int,
    opset: int,
    directory: Path | None = None,
    isolate: bool | None = None,
) -> ExportedModel:
    """Return the cached export for this key, or build, export, verify and cache it.

    Full-size exports run in a child process (`isolate`, default: not small), so the framework
    and its copies of the weights are gone when the export is, and a memory failure is reported.
    """
    directory = directory or cache_dir() / "models"
    directory.mkdir(parents=True, exist_ok=True)
    onnx_path = (
        directory
        / f"{cache_stem(entry.name, small)}-{cache_key(entry, weights, small, opset, weights_path)}"
        ".onnx"
    )
    meta = read_entry(onnx_path)
    if meta is None:
        isolate = (not small if isolate is None else isolate) and is_registered(entry)
        args: dict[str, Any] = dict(small=small, seed=seed, opset=opset, onnx_path=onnx_path)
        with progress.step(
            f"exporting {entry.name} to ONNX ({entry.framework}), cached after this"
        ):
            meta = (
                export_in_child(entry, weights, weights_path, **args)
                if isolate
                else build_export(entry, weights, weights_path, **args)
            )
    elif "flops_shared_per_call" not in meta:  # recorded before shared FLOPs were split out
        inputs = tuple(InputSpec.from_dict(i) for i in meta["inputs"])
        per_sample, shared = flops_or_none(onnx_path, inputs)
        meta = write_entry(
            onnx_path, {**meta, "flops_per_sample": per_sample, "flops_shared_per_call": shared}
        )
    return exported_from_meta(meta, onnx_path)


def is_registered(entry: ModelEntry) -> bool:
    """Whether a child process can find `entry` by name (entries made on the fly cannot)."""
    return entry.name in MODELS.names() and MODELS.get(entry.name) is entry


def latest_cached_meta(
    entry_name: str, small: bool = False, directory: Path | None = None
) -> dict | None:
    """Metadata of the newest cached export of `entry_name`, without importing any framework."""
    directory = directory or cache_dir() / "models"
    stem = cache_stem(entry_name, small)
    metas = [p for p in directory.glob(f"{stem}-*.json") if len(p.stem) == len(stem) + 13]
    for meta_file in sorted(metas, key=lambda p: p.stat().st_mtime, reverse=True):
        meta, _ = entry_problem(meta_file.with_suffix(".onnx"))
        if meta is not None:
            return meta
    return None


def export_in_child(
    entry: ModelEntry,
    weights: WeightsInfo,
    weights_path: Path | None,
    *,
    small: bool,
    seed: int,
    opset: int,
    onnx_path: Path,
) -> dict:
    return run_export_child(
        entry,
        weights,
        weights_path,
        small=small,
        seed=seed,
        opset=opset,
        onnx_path=onnx_path,
        env=EXPORTERS.get(entry.framework).child_env,
    )


def exported_from_meta(meta: dict, onnx_path: Path) -> ExportedModel:
    return ExportedModel(
        name=meta["name"],
        onnx_path=onnx_path,
        inputs=tuple(InputSpec.from_dict(i) for i in meta["inputs"]),
        outputs=tuple(meta["outputs"]),
        weights=WeightsInfo.from_dict(meta["weights"]),
        flops_per_sample=meta.get("flops_per_sample"),
        params=meta.get("params"),
        flops_shared_per_call=meta.get("flops_shared_per_call") or 0.0,
        opset=meta.get("opset"),
        small=meta.get("small", False),
        dynamic_batch=meta.get("dynamic_batch", True),
        verification=meta.get("verification", {}),
        framework=meta.get("framework", "onnx"),
        task=meta.get("task", ""),
    )
