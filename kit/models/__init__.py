"""Model zoo: build every published workload offline and export it to ONNX.

Floor 3 of kit/ (docs/architecture.md): imports kit.measure, kit.hardware, kit.published and
the leaves.

>>> from kit.models import model_names
>>> "resnet50-torch-fp32" in model_names()
True
"""

from __future__ import annotations

from pathlib import Path

from kit.models.export import DEFAULT_OPSET, cached_export
from kit.models.onnx_file import load_onnx_file
from kit.models.spec import ExportedModel, InputSpec, ModelEntry, WeightsInfo, make_inputs
from kit.models.weights import resolve_weights
from kit.models.zoo import MODELS

__all__ = [
    "DEFAULT_OPSET",
    "ExportedModel",
    "InputSpec",
    "ModelEntry",
    "WeightsInfo",
    "MODELS",
    "get_entry",
    "model_names",
    "export_model",
    "load_model",
    "make_inputs",
]


def model_names() -> list[str]:
    return MODELS.names()


def get_entry(name: str) -> ModelEntry:
    return MODELS.get(name)


def export_model(
    name: str,
    *,
    small: bool = False,
    weights: str = "random",
    seed: int = 0,
    opset: int = DEFAULT_OPSET,
    cache: Path | None = None,
) -> ExportedModel:
    """Build the zoo entry `name` and export it to ONNX (cached under outputs/cache/models)."""
    entry = MODELS.get(name)
    info, path = resolve_weights(name, weights, seed)
    return cached_export(entry, info, path, small=small, seed=seed, opset=opset, directory=cache)


def load_model(model: str, **kwargs) -> ExportedModel:
    """A zoo name, or a path to the user's own .onnx file."""
    if model.endswith(".onnx"):
        return load_onnx_file(
            Path(model), **{k: v for k, v in kwargs.items() if k == "input_shapes"}
        )
    kwargs.pop("input_shapes", None)
    return export_model(model, **kwargs)
