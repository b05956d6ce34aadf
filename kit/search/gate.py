"""Which candidates may stand in for a published row: the precision-class gate and the numerics
gate.

One rule for every row and every hardware: a row runs at its published precision class or at any
higher precision, and the fastest candidate that passes the numerics gate wins. An FP16 row may run
at a 16-bit type (bf16, fp16) or at fp32; an FP8 row at an 8-bit type (int8), a 16-bit type or fp32.
fp32 is probed everywhere, not only where 16-bit is emulated: on a CPU without AMX, 16-bit eager
arithmetic can be slower than a good fp32 runtime, and then fp32 stands in (the report says so,
with both throughputs). A candidate's outputs must also stay within a tolerance of the fp32
reference: the mean absolute difference relative to the reference's mean magnitude, per precision
class, and no NaN/Inf the reference does not have.

>>> precision_gate("fp32", "FP16") is None
True
>>> precision_gate("int8", "FP16") is None
False
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.precision import PublishedPrecision, RunPrecision

#: relative mean |diff| allowed against the fp32 reference, per precision class (bits). bf16 keeps
#: 8 significant bits (relative step 2^-8 = 0.4 %); through a deep network the mean error of a
#: sound 16-bit run stays near 1 %, so 5 % catches a broken conversion without rejecting bf16.
#: Dynamic/static int8 on random weights lands at a few to ~15 %; 25 % rejects garbage.
REL_TOLERANCE = {32: 1e-3, 16: 0.05, 8: 0.25}


def bits(precision: str) -> int:
    """The bits of a run precision ("fp16": 16); UnknownValueError for one the kit does not run."""
    return RunPrecision.parse(precision).bits


def row_bits(published: str) -> int:
    """The bits of a published row's precision ("FP8": 8, in either case)."""
    return PublishedPrecision.parse(published).bits


def precision_gate(precision: str, published: str) -> str | None:
    """None when `precision` may stand in for the `published` row (its class or a higher precision),
    else why not."""
    row = PublishedPrecision.parse(published)
    have, want = bits(precision), row.bits
    if have >= want:
        return None
    return (
        f"{precision} ({have}-bit) is below the row's {row} class: a row runs at its "
        f"published precision class or higher"
    )


@dataclass(frozen=True)
class NumericsVerdict:
    """The numerics gate's outcome for one candidate."""

    relative_error: float  # mean |diff| / mean |reference|
    tolerance: float
    extra_nonfinite: int  # NaN/Inf in the candidate beyond those of the reference
    reason: str  # empty when within tolerance

    @property
    def ok(self) -> bool:
        return not self.reason

    def to_dict(self) -> dict:
        return {
            "relative_error": self.relative_error,
            "tolerance": self.tolerance,
            "extra_nonfinite": self.extra_nonfinite,
            "numerics_ok": self.ok,
            "numerics_reason": self.reason,
        }


def numerics_gate(
    precision: str, mean_abs: float, reference_scale: float, extra_nonfinite: int = 0
) -> NumericsVerdict:
    """Whether a candidate's mean |diff| against the fp32 reference is within its class's tolerance.

    `reference_scale` is the mean |value| of the reference outputs.
    """
    tol = REL_TOLERANCE[bits(precision)]
    rel = (
        mean_abs / reference_scale
        if reference_scale > 0
        else (0.0 if mean_abs == 0 else float("inf"))
    )
    if extra_nonfinite > 0:
        return NumericsVerdict(
            rel,
            tol,
            extra_nonfinite,
            f"{extra_nonfinite} NaN/Inf values the fp32 reference does not have",
        )
    if not rel <= tol:
        return NumericsVerdict(
            rel,
            tol,
            0,
            f"mean |diff| is {rel:.3g} of the reference's mean |value|, "
            f"above the {tol:g} allowed for {precision}",
        )
    return NumericsVerdict(rel, tol, 0, "")
