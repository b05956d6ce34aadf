"""Read LoadGen's mlperf_log_summary.txt: VALID/INVALID, the reasons, latencies, throughput."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit.errors import MissingResource

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"

_PERCENTILE = re.compile(r"^([\d.]+) percentile latency \(ns\)\s*:\s*(\d+)")
_FIELD = re.compile(r"^\s*([^:*][^:]*?)\s*:\s*(.*?)\s*$")
#: The throughput line of each scenario's summary, best first.
_THROUGHPUT_KEYS = (
    "Completed samples per second",
    "Samples per second",
    "QPS w/o loadgen overhead",
    "QPS w/ loadgen overhead",
)


@dataclass(kw_only=True)
class LoadGenSummary:
    """One LoadGen run as its summary log states it (latencies in ms)."""

    scenario: str
    mode: str
    result: str | None  # "VALID", "INVALID", or None (accuracy mode prints none)
    reasons: list[str]  # the unsatisfied constraints and LoadGen's recommendations
    samples_per_second: float | None
    scheduled_samples_per_second: float | None
    percentiles_ms: dict[str, float]  # "50", "90", "99", "99.9" ...
    mean_ms: float | None
    max_ms: float | None
    target_qps: float | None
    target_latency_ms: float | None
    constraints: dict[str, bool] = field(default_factory=dict)
    log_dir: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.result == "VALID"

    @property
    def p99_ms(self) -> float | None:
        return self.percentiles_ms.get("99")

    @property
    def p90_ms(self) -> float | None:
        return self.percentiles_ms.get("90")

    def meets_bound(self, bound_ms: float, percentile: str = "99") -> bool:
        """The latency verdict alone: the percentile is under the bound and every query answered.

        Short runs are INVALID for LoadGen's early-stopping rule (p99 needs ~460+ queries) even
        when every query was fast; this separates "too slow" from "too short".
        """
        p = self.percentiles_ms.get(percentile)
        return p is not None and p <= bound_ms and not self.extra.get("lost_queries")

    def to_dict(self) -> dict:
        return {**asdict(self), "valid": self.valid, "p99_ms": self.p99_ms, "p90_ms": self.p90_ms}


def read_summary(log_dir: Path) -> LoadGenSummary:
    path = Path(log_dir) / SUMMARY_FILE
    if not path.exists():
        raise MissingResource(f"no LoadGen summary at {path}: the run did not finish")
    summary = parse_summary(path.read_text())
    summary.log_dir = str(log_dir)
    return summary


def parse_summary(text: str) -> LoadGenSummary:
    results, params = _sections(text)
    fields, percentiles, constraints, reasons = {}, {}, {}, []
    in_recommendations = False
    for line in results:
        if m := _PERCENTILE.match(line.strip()):
            percentiles[_pct(m.group(1))] = int(m.group(2)) / 1e6
            continue
        stripped = line.strip()
        if stripped.startswith(("Recommendations:", "Early Stopping Result:")):
            in_recommendations = True
            continue
        if in_recommendations and stripped.startswith("*"):
            reasons.append(stripped.lstrip("* ").strip())
            continue
        if in_recommendations and stripped and not stripped.startswith("="):
            if reasons and not _FIELD.match(line):
                reasons[-1] += " " + stripped
                continue
        if stripped.startswith("="):
            in_recommendations = False
        if m := _FIELD.match(line):
            key, value = m.group(1), m.group(2)
            if key.endswith("satisfied"):
                constraints[key] = value.lower().startswith("yes")
                if not constraints[key]:
                    reasons.insert(sum(not v for v in constraints.values()) - 1, f"{key}: NO")
            else:
                fields[key] = value
    for key, value in _params(params).items():
        fields.setdefault(f"param {key}", value)
    return LoadGenSummary(
        scenario=fields.get("Scenario", ""),
        mode=fields.get("Mode", ""),
        result=fields.get("Result is"),
        reasons=reasons,
        samples_per_second=next((_num(fields[k]) for k in _THROUGHPUT_KEYS if k in fields), None),
        scheduled_samples_per_second=_num(fields.get("Scheduled samples per second")),
        percentiles_ms=percentiles,
        mean_ms=_ns_to_ms(fields.get("Mean latency (ns)")),
        max_ms=_ns_to_ms(fields.get("Max latency (ns)")),
        target_qps=_num(fields.get("param target_qps")),
        target_latency_ms=_ns_to_ms(fields.get("param target_latency (ns)")),
        constraints=constraints,
    )


def _sections(text: str) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Test Parameters Used":
            return lines[:i], lines[i + 1 :]
    return lines, []


def _params(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        if (m := _FIELD.match(line)) and not line.startswith("="):
            out[m.group(1)] = m.group(2)
    return out


def _pct(text: str) -> str:
    return f"{float(text):g}"


def _num(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _ns_to_ms(value: str | None) -> float | None:
    n = _num(value)
    return n / 1e6 if n is not None else None
