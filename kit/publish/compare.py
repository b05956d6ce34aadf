"""Published figure beside measured figure, with a verdict and the reason for it.

Verdicts: `reproduced` (same part, the published figure within tolerance of the measured 95 %
interval), `differs` (same part, outside it; the interval is shown), `not comparable` (other
hardware: the ratio and its interval are shown), `not measured: <reason>`. A figure measured in a
noisy window says so in its reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from kit.hardware.parts import MeasuredOn
from kit.measure.stats import Interval
from kit.results.reasons import DifferenceCode, Reason, ReasonCode

__all__ = ["Comparison", "DifferenceCode", "Reason", "ReasonCode", "Verdict", "verdict"]

# Tolerances, stated in every scorecard.
THROUGHPUT_TOLERANCE = 0.10  # |measured / published - 1| for QPS, latency, efficiency
ACCURACY_FRACTION = 0.99  # measured >= 99 % of published (MLPerf's accuracy rule)
DIFF_TOLERANCE = 0.10  # numeric diff: measured <= published x 1.1

HIGHER_IS_BETTER = {"QPS", "Throughput", "Energy efficiency", "F1 Score", "Top-1", "Exact Match"}
ACCURACY_METRICS = {"F1 Score", "Top-1", "Exact Match"}
DIFF_METRICS = {"Mean Diff", "Std Diff", "Max Diff"}


class Verdict(StrEnum):
    REPRODUCED = "reproduced"  # the same part, within tolerance
    DIFFERS = "differs"  # the same part, outside tolerance
    NOT_COMPARABLE = "not comparable"  # other hardware (or the IPU path emulated): ratio shown
    NOT_MEASURED = "not measured"  # no measured value: the reason says why
    FAILED = "failed"  # the run behind the figure failed, timed out or left an unreadable result


@dataclass(kw_only=True)
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
    verdict: Verdict
    reason: str
    ratio: float | None = None  # measured / published
    source: str = ""
    run: str = ""  # the result file the measured value came from
    measured_low: float | None = None  # the measured figure's 95 % interval
    measured_high: float | None = None
    noisy: str = ""  # '' for a quiet window, else 'noisy: <reasons>'
    measured_all_calls: float | None = None  # the same figure over every call (ByteMLPerf's trims)
    indicative: str = ""  # '' unless a power figure's window was shorter than its sensor resolves
    measured_batch: str = ""  # the batch size of the measured figure ('' where none was measured)
    reason_code: str = ""  # a ReasonCode ('' in a row an older kit wrote)
    # where measured another way: each way, as the reason says it,
    differences: tuple[str, ...] = ()
    difference_codes: tuple[str, ...] = ()  # and its DifferenceCode
    measured_name: str = ""  # where the figure was measured: the device's name,
    measured_class: str = ""  # its class (cpu, gpu, ipu, unknown)
    emulated: bool = False  # and whether it was an IPU path through the PopRT test double
    # the result file of `run` relative to outputs/ (absolute outside it; '' in a row an older kit
    # wrote): the row links to the report beside that very result, not to its job's latest
    run_path: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "study": str(self.study), "verdict": str(self.verdict)}

    @classmethod
    def from_dict(cls, d: Mapping) -> Comparison:
        """A row read back: a scorecard DataFrame's record (NaN for a missing number) or a summary
        JSON's; a field an older kit did not write takes its default; other columns (an imported
        vendor's figures) are left out."""
        values: dict[str, Any] = {
            f.name: _read(d.get(f.name), str(f.type)) for f in fields(cls) if f.name in d
        }
        values = {k: v for k, v in values.items() if v is not None or k in OPTIONAL_NUMBERS}
        verdict = str(values.pop("verdict", Verdict.NOT_MEASURED))
        return cls(
            **{
                **ROW_DEFAULTS,
                **values,
                "verdict": Verdict(verdict) if verdict in VERDICTS else verdict,
            }
        )

    @classmethod
    def of(cls, row: Comparison | Mapping) -> Comparison:
        """`row` as a Comparison (a row read back from a record, or already one)."""
        return row if isinstance(row, Comparison) else cls.from_dict(row)


VERDICTS = {str(v) for v in Verdict}
OPTIONAL_NUMBERS = {
    "published",
    "measured",
    "ratio",
    "measured_low",
    "measured_high",
    "measured_all_calls",
}
ROW_DEFAULTS = {
    "study": "",
    "figure": "",
    "model": "",
    "precision": "",
    "batch_size": "",
    "unit": "",
    "published": None,
    "published_hardware": "",
    "measured": None,
    "measured_hardware": "",
    "reason": "",
}


def _read(value: object, kind: str) -> object:
    """One field of a row read back: NaN and None are missing (None); text as text; a list as a
    tuple."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if "tuple" in kind:
        return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()
    if kind.startswith("bool"):
        return bool(value)
    if kind.startswith("str"):
        return str(value)
    return value


def verdict(
    metric: str,
    published: float | None,
    measured: float | None,
    published_part: str | None,
    measured_on: MeasuredOn | None,
    missing_reason: str = "",
    *,
    interval: Interval | None = None,
    noisy: str = "",
    differences: list[str] | None = None,
) -> tuple[Verdict, str, float | None]:
    """(verdict, reason, ratio) for one figure.

    `published_part` is the exact part the figure came from (a kit.hardware.parts.PARTS key such as
    'c600' or 'gc2'); only a real run on that same part can reproduce it. With the measured
    figure's `interval`, "reproduced" means the published figure lies within tolerance of the
    interval; without one, within tolerance of the figure itself (and the reason says so).
    `noisy` ('noisy: <why>') is added to the reason. `differences` are the ways the figure was not
    measured as published (batch, clients, precision, passes, pack mode, PopRT version: see
    kit.publish.comparability); on the published part any of them makes it "not comparable".
    """
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return Verdict.NOT_MEASURED, missing_reason or "no result", None
    ratio = measured / published if published else None
    tail = f"; {noisy}" if noisy else ""
    shown = f"{ratio:.3g}x" if ratio is not None else "n/a"
    if (
        published
        and interval is not None
        and interval.low is not None
        and interval.high is not None
    ):  # a ratio
        shown += f" (95 % CI {interval.low / published:.3g}-{interval.high / published:.3g}x)"
    if measured_on is None or not measured_on.same_part(published_part):
        where = measured_on.label if measured_on else "unknown hardware"
        return (
            Verdict.NOT_COMPARABLE,
            f"measured on {where}, published on {published_part or 'unknown'}; ratio {shown}{tail}",
            ratio,
        )
    if differences:
        return Verdict.NOT_COMPARABLE, f"{'; '.join(differences)}; ratio {shown}{tail}", ratio
    if published is None:  # nothing to reproduce (the tolerance checks below need a figure)
        return Verdict.NOT_COMPARABLE, f"no published figure; measured {measured:.4g}{tail}", None
    if (
        interval is not None
        and interval.available
        and metric not in ACCURACY_METRICS | DIFF_METRICS
    ):
        ok, rule = interval_within_tolerance(published, interval)
    else:
        ok, rule = within_tolerance(metric, published, measured)
        if metric not in ACCURACY_METRICS | DIFF_METRICS:
            rule += f" (no interval: {interval.reason if interval else 'not recorded'})"
    return (Verdict.REPRODUCED if ok else Verdict.DIFFERS), rule + tail, ratio


def interval_within_tolerance(published: float, interval: Interval) -> tuple[bool, str]:
    """Published within THROUGHPUT_TOLERANCE of some point of the measured interval: the interval's
    distance from the published figure (negative when it holds it) at most the tolerance x
    published. Written as differences, not ratios, so that a figure exactly 10 % away counts as
    within (110 / 100 - 1 is 0.10000000000000009 in floating point)."""
    lo, hi = interval.low, interval.high
    assert lo is not None and hi is not None, "an interval with both bounds (Interval.available)"
    ok = max(lo - published, published - hi) <= THROUGHPUT_TOLERANCE * abs(published)
    where = "within" if ok else "outside"
    return ok, (
        f"published {published:.4g} {where} {THROUGHPUT_TOLERANCE:.0%} of the measured 95 % interval "  # noqa: E501
        f"[{lo:.4g}, {hi:.4g}]"
    )


def within_tolerance(metric: str, published: float, measured: float) -> tuple[bool, str]:
    if metric in ACCURACY_METRICS:
        return (
            measured >= ACCURACY_FRACTION * published,
            f"accuracy >= {ACCURACY_FRACTION:.0%} of published",
        )
    if metric in DIFF_METRICS:
        return measured <= (
            1 + DIFF_TOLERANCE
        ) * published, f"diff <= published x {1 + DIFF_TOLERANCE:g}"
    # exact at 10 %, as above
    ok = abs(measured - published) <= THROUGHPUT_TOLERANCE * abs(published)
    return ok, f"within {THROUGHPUT_TOLERANCE:.0%} of published"


def tolerance_statement() -> str:
    return (
        f"Tolerances: throughput, latency and efficiency within {THROUGHPUT_TOLERANCE:.0%} of the "
        "measured 95 % interval (of the figure itself where no interval exists); "
        f"accuracy at least {ACCURACY_FRACTION:.0%} of the published value; numeric diffs at most "
        f"{1 + DIFF_TOLERANCE:g}x the published diff. Figures measured on other hardware are "
        "'not comparable' and show the ratio measured / published."
    )
