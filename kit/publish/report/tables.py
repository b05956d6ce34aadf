"""The tables a study's notebook shows, each built from its RunResult."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from kit.measure.power.summary import indicative
from kit.measure.stats import Interval
from kit.measure.time_account import by_phase
from kit.publish import scorecard
from kit.results import ResultKind, RunResult
from kit.results.sections import ModelInfo
from kit.results.tables import RooflineRow
from kit.results.windows import Measurement, Noise, Power, WindowPrecision


def bytemlperf_table(result: RunResult) -> pd.DataFrame:
    """ByteMLPerf's columns (BS, QPS, AVG and P99 latency over the calls its benchmark keeps) beside
    the mean, p50, p90 and p99 of every call and the kit's own QPS, each with its 95 % interval
    ('value ± half-width' or 'value [low, high]': `Interval.shown`); the precision reached and the
    window's noise."""
    return pd.DataFrame([bytemlperf_row(result, m) for m in result.sections.measurements])


def bytemlperf_row(result: RunResult, m: Measurement) -> dict:
    figures, latency = m.bytemlperf, m.latency
    return {
        "BS": m.batch_size,
        "QPS": with_interval(m, "qps_bytemlperf", m.qps_bytemlperf),
        "AVG Latency (ms)": with_interval(m, "bytemlperf_avg_latency_ms", figures.avg_latency_ms),
        "P99 Latency (ms)": with_interval(m, "bytemlperf_p99_latency_ms", figures.p99_latency_ms),
        "ByteMLPerf keeps": figures.kept or "— (not recorded)",
        "mean, all calls (ms)": with_interval(m, "mean_ms", latency.mean_ms),
        "p99, all calls (ms)": with_interval(m, "p99_ms", latency.p99_ms),
        "p50 (ms)": with_interval(m, "p50_ms", latency.p50_ms),
        "p90 (ms)": with_interval(m, "p90_ms", latency.p90_ms),
        "samples/s (all calls / wall)": with_interval(m, "throughput", m.throughput),
        "calls": latency.count,
        "threads": threads_text(m),
        "precision (95 % CI)": precision_text(m.precision),
        "noise": noise_text(m.noise),
        **compute_columns(result, m),
        **power_columns(m.power),
    }


def threads_text(m: Measurement | Mapping) -> int | str:
    """The measurement's thread count, with how its clients ran where a session said so (a searched
    `clients` option on a GPU: '2 (2 clients: threads, each its own CUDA stream)')."""
    m = Measurement.of(m)
    return f"{m.threads} ({m.clients})" if m.clients else m.threads


def with_interval(m: Measurement, name: str, value: float | None, spec: str = ".4g") -> str:
    """The value with the measurement's interval `name` ('210 ± 5.607', or '19.91 [19.34, 19.91]'
    where the interval is not symmetric about it); '— (why)' without a value."""

    if value is None or pd.isna(value):
        return "— (not measured)"
    iv = Interval.from_dict(m.interval(name))
    if iv is None or not iv.available:
        why = iv.reason if iv is not None else "not recorded"
        return f"{format(value, spec)} (no interval: {why})"
    return Interval(value, iv.low, iv.high).text(spec)


def precision_text(p: WindowPrecision) -> str:
    """'±3.1 % (target 5 %: met; 7 rounds; target reached)' or why there is none."""
    if p.reached is None:
        return "— (fewer than 2 rounds)"
    target = (
        f"target {p.target_ci:.0%}: {'met' if p.met else 'missed'}" if p.target_ci else "no target"
    )
    return f"±{p.reached:.1%} ({target}; {p.rounds} rounds; {p.stopped_by or '?'})"


def noise_text(noise: Noise | None) -> str:
    if noise is None:
        return "— (not sampled)"
    if noise.noisy:
        return "noisy: " + "; ".join(noise.reasons)
    return (
        f"quiet (steal {noise.steal_share or 0:.0%}, other load {noise.other_load or 0:.0%})"
        if noise.steal_share is not None
        else "quiet (/proc/stat unreadable)"
    )


def compute_columns(result: RunResult, m: Measurement | Mapping) -> dict:
    """Achieved GFLOP/s (FLOPs counted from the ONNX graph) and the fraction of the device's
    peak."""
    m, sections = Measurement.of(m), result.sections
    model = sections.model or ModelInfo()
    flops = model.flops_per_sample
    peak = sections.backend.device_info.peak.gflops if sections.backend else None
    if not flops or not m.throughput:
        why = "— (no FLOP count)" if not flops else "— (no throughput)"
        return {"GFLOP/s": why, "% of peak": why}
    flops += (model.flops_shared_per_call or 0.0) / m.batch_size
    achieved = flops * m.throughput / 1e9
    share = 100 * achieved / peak if peak else None
    return {
        "GFLOP/s": round(achieved, 1),
        "% of peak": "— (no peak for this device)" if share is None else round(share, 1),
    }


def power_columns(power: Power | None) -> dict:
    """Mean power and efficiency with the method that produced them (or why there are none)."""
    if power is None or not power.measured:
        reason = (power.reason if power else None) or "not sampled"
        return {
            "power (W)": f"— ({reason})",
            "samples/s/W": f"— ({reason})",
            "power method": f"unavailable: {reason}",
        }
    flag = indicative(power.raw)
    short = f" ({flag})" if flag else ""
    return {
        "power (W)": _rounded(power.mean_w, 2),
        "samples/s/W": _rounded(power.samples_per_s_per_w, 3),
        "power method": f"measured: {power.sensor}{short}",
    }


def numerics_table(result: RunResult) -> pd.DataFrame:
    cols = [
        "batch_size",
        "mean_abs",
        "std_abs",
        "max_abs",
        "mean_rel",
        "max_rel",
        "nan_count",
        "inf_count",
        "reference",
    ]
    return pd.DataFrame([n.to_dict() for n in result.numerics], columns=cols)


def search_table(result: RunResult) -> pd.DataFrame:
    """Every candidate of the per-row search: throughput with its interval, numerics, and why it
    lost (or that it was chosen); empty when the run was not searched."""
    cols = [
        "candidate",
        "status",
        "samples/s",
        "95% interval",
        "x today's mapping",
        "rel. error",
        "tolerance",
        "load (s)",
        "reason",
    ]
    probes = result.sections.tables.search
    today = next((p.throughput for p in probes if p.today and p.throughput), None)
    rows = [
        {
            "candidate": p.label + (" [today's mapping]" if p.today else ""),
            "status": p.status,
            "samples/s": None if p.throughput is None else round(p.throughput, 3),
            "95% interval": ""
            if p.low is None
            else f"{p.low:.3g}-{'unbounded' if p.high is None else format(p.high, '.3g')}",
            "x today's mapping": None
            if p.throughput is None or not today
            else round(p.throughput / today, 3),
            "rel. error": None if p.relative_error is None else float(f"{p.relative_error:.3g}"),
            "tolerance": p.tolerance,
            "load (s)": p.load_s,
            "reason": p.because,
        }
        for p in probes
    ]
    return pd.DataFrame(rows, columns=cols)


def roofline_table(result: RunResult) -> pd.DataFrame:
    """Each figure's roofline position: FLOPs and bytes per sample, intensity, the bound it sits
    under, the fraction of that bound achieved, and a flag when far below it, or above it (then the
    FLOP count or the stated peak is wrong, and the row says so rather than pass as a fast
    figure)."""
    cols = [
        "batch_size",
        "precision",
        "GFLOP/sample",
        "MB/sample (est.)",
        "FLOP/byte",
        "ridge FLOP/byte",
        "bound",
        "attainable",
        "achieved",
        "fraction of bound",
        "flag",
        "matrix-op time share",
        "matrix ops: fraction of peak",
        "why below the peak",
        "peak",
        "bandwidth (GB/s)",
    ]
    rows = [
        {
            "batch_size": r.batch_size,
            "precision": r.precision,
            "GFLOP/sample": _rounded(r.flops_per_sample, 3, per=1e9),
            "MB/sample (est.)": _rounded(r.bytes_per_sample, 2, per=1e6),
            "FLOP/byte": _rounded(r.intensity_flop_per_byte, 1),
            "ridge FLOP/byte": _rounded(r.ridge_flop_per_byte, 1),
            "bound": r.bound,
            "attainable": _rounded(r.attainable_gflops, 1),
            "achieved": _rounded(r.achieved_gflops, 1),
            "fraction of bound": _rounded(r.fraction_of_bound, 3),
            "flag": roofline_flag(r),
            "matrix-op time share": _rounded(r.matrix_time_share),
            "matrix ops: fraction of peak": _rounded(r.matrix_fraction_of_peak),
            "why below the peak": r.below_peak_reason,
            "peak": f"{r.peak_gflops:g} {r.peak_unit}",
            "bandwidth (GB/s)": r.bandwidth_gbs,
        }
        for r in result.sections.tables.roofline
    ]
    return pd.DataFrame(rows, columns=cols)


def _rounded(value: float | None, digits: int = 3, per: float = 1.0) -> float | str:
    """`value / per` rounded to `digits`; a dash where the result did not record it."""
    return "—" if value is None else round(value / per, digits)


def roofline_flag(row: RooflineRow) -> str:
    """What a figure's place against its bound says: far below it, above it by more than boost
    clocks explain (a FLOP count or peak wrong), or above it by less (the bound is an estimate).

    >>> roofline_flag(RooflineRow(batch_size=4, fraction_of_bound=1.036, bound="memory"))[:62]
    'above its bound by 3.6%: within what boost clocks and fewer by'
    >>> roofline_flag(RooflineRow(batch_size=4, fraction_of_bound=0.8))
    ''
    """
    if row.above_bound:
        return "ABOVE THE BOUND: FLOP count or peak wrong"
    if row.fraction_of_bound is not None and row.fraction_of_bound > 1:
        why = (
            "fewer bytes than the unfused estimate"
            if row.bound == "memory"
            else "a FLOP count a little high"
        )
        return (
            f"above its bound by {row.fraction_of_bound - 1:.1%}: within what boost clocks and "
            f"{why} explain"
        )
    return "far below" if row.far_below else ""


def peaks_table(result: RunResult) -> pd.DataFrame:
    """The device's nominal peak at every precision (int8 in GOPS), with method and source."""
    cols = ["precision", "peak", "unit", "native", "method", "source"]
    return pd.DataFrame(
        [
            {
                "precision": p.precision,
                "peak": p.gflops,
                "unit": p.unit,
                "native": p.native,
                "method": p.method,
                "source": p.source,
            }
            for p in result.sections.tables.peaks
        ],
        columns=cols,
    )


def accuracy_table(result: RunResult) -> pd.DataFrame:
    """The published accuracy (or numeric) metric: value and status, or why it is not measured."""
    cols = ["metric", "value", "status", "dataset", "data_percent"]
    return pd.DataFrame(
        [{c: getattr(a, c) for c in cols} for a in result.sections.accuracy], columns=cols
    )


def power_table(result: RunResult) -> pd.DataFrame:
    """Mean power and efficiency per batch size, with the sensor or the reason there is none.

    With replicas the batch is the paper's: micro batch x replicas."""
    return pd.DataFrame(
        [
            {
                "batch_size": m.batch_size * (m.threads if m.mode == "replicas" else 1),
                **power_columns(m.power),
            }
            for m in result.sections.measurements
        ]
    )


def time_table(result: RunResult) -> pd.DataFrame:
    """Where the run's time went: each phase's seconds and share of the run, what it did, then the
    seconds no phase covered and the total; empty for a result that kept no account."""
    account = result.sections.tables.time_account
    total = account.total_s
    cols = ["phase", "batch_size", "seconds", "share", "detail"]
    if not account.phases:
        return pd.DataFrame(columns=cols)

    def row(phase: str, batch, seconds: float | None, detail: str) -> dict:
        if seconds is None:  # not recorded: shown as missing, never as 0 s
            return {
                "phase": phase,
                "batch_size": batch,
                "seconds": None,
                "share": None,
                "detail": detail,
            }
        share = f"{100 * seconds / total:.0f} %" if total else None
        return {
            "phase": phase,
            "batch_size": batch,
            "seconds": round(seconds, 1),
            "share": share,
            "detail": detail,
        }

    rows = [row(p.phase, p.batch_size, p.seconds, p.detail) for p in account.phases]
    rows += [
        row(
            "other",
            None,
            account.other_s,
            "between the phases (the backend's and the power sensor's setup, describing the model)",
        ),
        row(
            "total",
            None,
            total,
            " · ".join(f"{k} {v:.1f} s" for k, v in by_phase(account.raw).items()),
        ),
    ]
    return pd.DataFrame(rows, columns=cols).astype({"batch_size": "Int64"})


def beside_published(result: RunResult, path: Path | None = None) -> pd.DataFrame:
    """This run's rows of the scorecard, formatted for reading."""
    # one run is one model and precision: the scorecard's columns without them
    cols = [c for c in scorecard.DISPLAY_COLUMNS if c not in ("model", "precision")]
    rows = scorecard_rows(result, path)
    return scorecard.display_table(rows)[cols] if not rows.empty else pd.DataFrame(columns=cols)


def scorecard_rows(result: RunResult, path: Path | None = None) -> pd.DataFrame:
    """This run's rows of the scorecard, as numbers."""
    p = path or Path("this-run.json")
    if result.kind == ResultKind.C2_STUDY:
        rows = scorecard.c2_rows([(p, result)])
    else:
        rows = [
            r
            for r in scorecard.bytemlperf_rows([(p, result)])
            if r.model == result.parameters.get("model")
            and r.precision == result.parameters.get("published_precision")
        ]
    return pd.DataFrame([r.to_dict() for r in rows])
