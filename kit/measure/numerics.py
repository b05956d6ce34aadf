"""Numeric agreement of a backend's outputs with the fp32 CPU reference (ByteMLPerf's definitions).

ByteMLPerf's `draw_all_diff` (general_perf/datasets/test_accuracy.py): flatten both outputs, set
every NaN or Inf *value* to 0 in each, subtract, and divide by the reference with its zeros
replaced by 1 for the relative difference. Reported figures are rounded to 5 decimals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kit.errors import InvalidParameter
from kit.results import NumericCheck

#: ByteMLPerf rounds every reported diff to this many decimals
DECIMALS = 5


def _finite_or_zero(values: np.ndarray) -> np.ndarray:
    """A float64 copy with NaN and +-Inf values replaced by 0 (ByteMLPerf's rule)."""
    out = np.array(values, dtype=np.float64, copy=True)
    out[~np.isfinite(out)] = 0.0
    return out


def _flatten(outputs: list[np.ndarray], which: str) -> np.ndarray:
    try:
        return np.concatenate([np.asarray(o, dtype=np.float64).ravel() for o in outputs])
    except (TypeError, ValueError) as exc:
        raise InvalidParameter(
            f"{which} outputs", [getattr(o, "dtype", type(o)) for o in outputs], "numeric arrays"
        ) from exc


HISTOGRAM_BINS = 300  # ByteMLPerf's draw_all_diff: min(elements, 300) bins over each array's range


def _histogram(values: np.ndarray) -> dict:
    lo, hi = float(values.min()), float(values.max())
    counts, edges = np.histogram(values, bins=min(values.size, HISTOGRAM_BINS), range=(lo, hi))
    # numpy widens lo == hi
    return {"range": [float(edges[0]), float(edges[-1])], "counts": counts.tolist()}


def histograms(ref: np.ndarray, got: np.ndarray) -> dict:
    """The three histograms ByteMLPerf's `draw_all_diff` plots (its diff-distribution PNG), from
    the outputs with NaN/Inf already set to 0: the signed difference reference - candidate, the
    reference with its zeros replaced by 1 (as ByteMLPerf plots it, after that replacement) and
    the candidate; min(elements, 300) equal bins over each one's own range.

    >>> h = histograms(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 1.0]))
    >>> h["diff"], h["reference"]["counts"]
    ({'range': [0.0, 1.0], 'counts': [2, 0, 1]}, [2, 0, 1])
    """
    return {
        "diff": _histogram(ref - got),
        "reference": _histogram(np.where(ref == 0, 1.0, ref)),
        "candidate": _histogram(got),
    }


@dataclass(frozen=True, kw_only=True)
class NumericDiff:
    """Absolute and relative differences over all outputs, computed as ByteMLPerf does; the
    NaN and Inf counts (in either output, before they are set to 0) show what that rule hid."""

    mean_abs: float
    std_abs: float
    max_abs: float
    mean_rel: float
    max_rel: float
    nan_count: int
    inf_count: int
    elements: int
    reference: str = "onnxruntime fp32 CPU"
    #: ByteMLPerf's diff-distribution plot as numbers: {"diff", "reference", "candidate"} each
    #: {"range": [lo, hi], "counts": [...]} (see `histograms`), so a report can draw it from JSON
    histograms: dict | None = None

    @classmethod
    def between(
        cls,
        reference: list[np.ndarray],
        candidate: list[np.ndarray],
        reference_name: str = "onnxruntime fp32 CPU",
    ) -> NumericDiff:
        if len(reference) != len(candidate):
            raise InvalidParameter(
                "candidate outputs",
                f"{len(candidate)} outputs",
                f"as many outputs as the reference ({len(reference)})",
            )
        if not reference:
            raise InvalidParameter("reference outputs", "no outputs", "at least one output")
        raw_ref, raw_got = _flatten(reference, "reference"), _flatten(candidate, "candidate")
        if raw_ref.shape != raw_got.shape:
            shapes = [np.shape(c) for c in candidate]
            raise InvalidParameter(
                "candidate output sizes",
                f"{raw_got.size} values {shapes}",
                f"the reference's {raw_ref.size} values {[np.shape(r) for r in reference]}",
            )
        nan = int(np.isnan(raw_got).sum() + np.isnan(raw_ref).sum())
        inf = int(np.isinf(raw_got).sum() + np.isinf(raw_ref).sum())
        ref, got = _finite_or_zero(raw_ref), _finite_or_zero(raw_got)
        diff = np.abs(ref - got)
        with np.errstate(over="ignore"):
            rel = np.abs(np.nan_to_num(diff / np.where(ref == 0, 1.0, ref)))
        return cls(
            mean_abs=float(diff.mean()),
            std_abs=float(diff.std()),
            max_abs=float(diff.max()),
            mean_rel=float(rel.mean()),
            max_rel=float(rel.max()),
            nan_count=nan,
            inf_count=inf,
            elements=int(ref.size),
            reference=reference_name,
            histograms=histograms(ref, got),
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def check(self, batch_size: int) -> NumericCheck:
        """This diff as a result's numerics entry at `batch_size` (what the JSON holds)."""
        return NumericCheck.from_dict({"batch_size": batch_size, **self.to_dict()})

    def bytemlperf(self) -> dict[str, float]:
        """The five figures under ByteMLPerf's names, rounded to its 5 decimals."""
        return {
            "Mean Diff": round(self.mean_abs, DECIMALS),
            "Std Diff": round(self.std_abs, DECIMALS),
            "Max Diff": round(self.max_abs, DECIMALS),
            "Max Rel-Diff": round(self.max_rel, DECIMALS),
            "Mean Rel-Diff": round(self.mean_rel, DECIMALS),
        }
