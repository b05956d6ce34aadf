"""An ONNX export a study run will load, known before the run: a batch makes the ones not cached
yet side by side before its first timed job (kit.batch.prepare), instead of each job exporting its
model in turn.

>>> r = ExportRequest("swin-large-torch-fp32")
>>> round(r.need_bytes() / 1e9, 1)  # 4.3 x its 0.79 GB fp32 file + 0.6 GB (kit.measure.memory)
4.0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kit.errors import KitError
from kit.measure.memory import STEP_COSTS, estimate_need
from kit.models import ExportedModel, export_model
from kit.models.export import DEFAULT_OPSET, latest_cached_meta
from kit.models.weights import resolve_weights
from kit.models.zoo import MODELS

BYTES_PER_PARAMETER = 4  # an fp32 export: its ONNX file is about 4 bytes a parameter
UNKNOWN_PARAMETERS = 200e6  # an entry that states no parameter count is planned as a large one


@dataclass(frozen=True)
class ExportRequest:
    """One zoo model's export as a study run asks for it (`kit.models.export_model`'s arguments)."""

    model: str
    small: bool = False
    weights: str = "random"
    seed: int = 0
    opset: int = DEFAULT_OPSET

    def need_bytes(self) -> float:
        """The export's expected peak memory (kit.measure.memory's measured step costs)."""
        entry = MODELS.get(self.model)
        step = (
            f"export-{entry.framework}"
            if f"export-{entry.framework}" in STEP_COSTS
            else "export-torch"
        )
        return estimate_need(
            step, BYTES_PER_PARAMETER * (entry.reference_params or UNKNOWN_PARAMETERS)
        )

    def cached(self) -> bool:
        """Whether the newest cached export of the model has this opset and these weights (read
        from its metadata, no framework imported; a change of exporter version is the job's to
        find)."""
        meta = latest_cached_meta(self.model, self.small)
        if meta is None or meta.get("opset") != self.opset:
            return False
        try:
            info, _ = resolve_weights(self.model, self.weights, self.seed)
        except KitError:
            return False
        return {k: meta.get("weights", {}).get(k) for k in ("source", "detail")} == {
            "source": info.source,
            "detail": info.detail,
        }

    def export(self) -> ExportedModel:
        """The export, from the cache or made now (each full-size one in a child process)."""
        return export_model(
            self.model, small=self.small, weights=self.weights, seed=self.seed, opset=self.opset
        )

    def to_dict(self) -> dict:
        return asdict(self)
