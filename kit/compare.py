"""Published figure beside measured figure, with a verdict and the reason for it.

Verdicts: `reproduced` (same hardware class, within tolerance), `differs` (same class, outside),
`not comparable` (other hardware: the ratio is shown), `not measured: <reason>`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Tolerances, stated in every scorecard.
THROUGHPUT_TOLERANCE = 0.10  # |measured / published - 1| for QPS, latency, efficiency
ACCURACY_FRACTION = 0.99  # measured >= 99 % of published (MLPerf's accuracy rule)
DIFF_TOLERANCE = 0.10  # numeric diff: measured <= published x 1.1

HIGHER_IS_BETTER = {"QPS", "Throughput", "Energy efficiency", "F1 Score", "Top-1", "Exact Match"}
ACCURACY_METRICS = {"F1 Score", "Top-1", "Exact Match"}
DIFF_METRICS = {"Mean Diff", "Std Diff", "Max Diff"}


@dataclass
class Comparison:
    """One row of the scorecard."""

    study: str
    figure: str  # e.g. "QPS", "Latency"
    model: str
    precision: str
    batch_size: str
    unit: str
    published: float | None
    published_hardware: str
    measured: float | None
    measured_hardware: str
    verdict: str
    reason: str
    ratio: float | None = None  # measured / published
    source: str = ""
    run: str = ""  # the result file the measured value came from

    def to_dict(self) -> dict:
        return asdict(self)


def hardware_class(kind: str) -> str:
    """'ipu', 'gpu' or 'cpu'; an emulated IPU (PopRT test double) is not an IPU."""
    return kind if kind in ("ipu", "gpu", "cpu") else "other"


def verdict(metric: str, published: float | None, measured: float | None, published_kind: str,
            measured_kind: str | None, missing_reason: str = "") -> tuple[str, str, float | None]:
    """(verdict, reason, ratio) for one figure."""
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return f"not measured: {missing_reason or 'no result'}", missing_reason, None
    ratio = measured / published if published else None
    if measured_kind is None or hardware_class(measured_kind) != hardware_class(published_kind):
        shown = f"{ratio:.3g}x" if ratio is not None else "n/a"
        return "not comparable", f"measured on {measured_kind or 'unknown'}, published on {published_kind}; ratio {shown}", ratio
    ok, rule = within_tolerance(metric, published, measured)
    return ("reproduced" if ok else "differs"), rule, ratio


def within_tolerance(metric: str, published: float, measured: float) -> tuple[bool, str]:
    if metric in ACCURACY_METRICS:
        return measured >= ACCURACY_FRACTION * published, f"accuracy >= {ACCURACY_FRACTION:.0%} of published"
    if metric in DIFF_METRICS:
        return measured <= (1 + DIFF_TOLERANCE) * published, f"diff <= published x {1 + DIFF_TOLERANCE:g}"
    ok = abs(measured / published - 1) <= THROUGHPUT_TOLERANCE
    return ok, f"within {THROUGHPUT_TOLERANCE:.0%} of published"


def tolerance_statement() -> str:
    return (f"Tolerances: throughput, latency and efficiency within {THROUGHPUT_TOLERANCE:.0%}; "
            f"accuracy at least {ACCURACY_FRACTION:.0%} of the published value; numeric diffs at most "
            f"{1 + DIFF_TOLERANCE:g}x the published diff. Figures measured on other hardware are "
            "'not comparable' and show the ratio measured / published.")
