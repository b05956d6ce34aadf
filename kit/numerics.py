"""Numeric agreement of a backend's outputs with the fp32 CPU reference (ByteMLPerf's definitions)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class NumericDiff:
    """Absolute and relative differences over all outputs; NaN/Inf are counted, then set to 0
    as ByteMLPerf does, so the means stay finite but the counts show what happened."""

    mean_abs: float
    std_abs: float
    max_abs: float
    mean_rel: float
    max_rel: float
    nan_count: int
    inf_count: int
    elements: int
    reference: str = "onnxruntime fp32 CPU"

    @classmethod
    def between(cls, reference: list[np.ndarray], candidate: list[np.ndarray],
                reference_name: str = "onnxruntime fp32 CPU") -> NumericDiff:
        if len(reference) != len(candidate):
            raise ValueError(f"{len(reference)} reference outputs vs {len(candidate)} candidate outputs")
        ref = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in reference])
        got = np.concatenate([np.asarray(c, dtype=np.float64).ravel() for c in candidate])
        if ref.shape != got.shape:
            raise ValueError(f"output sizes differ: {ref.shape} vs {got.shape}")
        nan = int(np.isnan(got).sum() + np.isnan(ref).sum())
        inf = int(np.isinf(got).sum() + np.isinf(ref).sum())
        diff = np.nan_to_num(np.abs(ref - got), nan=0.0, posinf=0.0, neginf=0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.nan_to_num(diff / np.abs(ref), nan=0.0, posinf=0.0, neginf=0.0)
        return cls(float(diff.mean()), float(diff.std()), float(diff.max()), float(rel.mean()),
                   float(rel.max()), nan, inf, int(ref.size), reference_name)

    def to_dict(self) -> dict:
        return asdict(self)
