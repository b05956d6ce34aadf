"""Plots and the C2 tables of a result, with the published curves beside the measured ones."""

from __future__ import annotations

import pandas as pd

from kit.measure.intervals import figure_interval
from kit.measure.stats import Interval
from kit.published import figures as published
from kit.results import RunResult
from kit.results.reasons import ReasonCode
from kit.results.tables import C2_FIGURES, C2Row
from kit.results.windows import Measurement


def plot_batches(result: RunResult):
    """Latency and throughput against batch size, with 95 % intervals as error bars, beside the
    published IPU per-batch figures of the same row (ByteMLPerf's report JSON), on log axes."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    ms = sorted(result.sections.measurements, key=lambda m: m.batch_size)
    if ms:
        bs = [m.batch_size for m in ms]
        for ax, key, fmt, label in (
            (a, "bytemlperf_avg_latency_ms", "o-", "mean, measured here"),
            (a, "bytemlperf_p99_latency_ms", "s--", "p99, measured here"),
            (b, "qps_bytemlperf", "o-", "measured here"),
        ):
            values = [_plotted(m, key) for m in ms]
            ax.errorbar(
                bs, values, yerr=_error_bars(ms, key, values), fmt=fmt, capsize=3, label=label
            )
    pub = published_per_batch(result)
    if not pub.empty:
        a.plot(
            pub["batch"],
            pub["Performance/AVG Latency"],
            "^-",
            color="C2",
            label="mean, published IPU",
        )
        a.plot(
            pub["batch"],
            pub["Performance/P99 Latency"],
            "v:",
            color="C3",
            label="p99, published IPU",
        )
        b.plot(pub["batch"], pub["Performance/QPS"], "^-", color="C2", label="published IPU (C600)")
    a.set(
        xlabel="batch size",
        ylabel="latency (ms)",
        title="Latency per call",
        xscale="log",
        yscale="log",
    )
    b.set(
        xlabel="batch size",
        ylabel="samples/s",
        title="Throughput (QPS)",
        xscale="log",
        yscale="log",
    )
    for ax in (a, b):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _plotted(m: Measurement, key: str) -> float:
    """The figure `key` of a measurement (NaN where it was not recorded)."""
    value = (
        m.qps_bytemlperf
        if key == "qps_bytemlperf"
        else m.bytemlperf.figure(key.removeprefix("bytemlperf_"))
    )
    return float("nan") if value is None else value


def _error_bars(ms: list[Measurement], key: str, values: list[float]) -> list[list[float]]:
    low, high = [], []
    for m, v in zip(ms, values, strict=True):
        iv = Interval.from_dict(m.interval(key))
        lo, hi = (iv.low, iv.high) if iv else (None, None)
        low.append(v - lo if lo is not None and v is not None else 0.0)
        high.append(hi - v if hi is not None and v is not None else 0.0)
    return [low, high]


def published_per_batch(result: RunResult) -> pd.DataFrame:
    """The published IPU per-batch QPS and latencies of this run's row (empty when none)."""
    model, precision = result.parameters.get("model"), result.parameters.get("published_precision")
    try:
        table = published.per_batch_table().reset_index()
    except KeyError:
        return pd.DataFrame()
    return table[(table["model"] == model) & (table["precision"] == precision)].sort_values("batch")


#: Tables 1-3 of the C2 study: title -> (the published column, the figure's key in a C2 row).
C2_TABLES = {
    "Table 1. Latency (ms per batch)": ("Latency", "latency_ms"),
    "Table 2. Throughput (images/s)": ("Throughput", "throughput"),
    "Table 3. Energy efficiency (images/s/W)": ("Energy efficiency", "efficiency"),
}


def power_unavailable_batches(result: RunResult, key: str) -> set[int]:
    """The batch sizes whose figure `key` is missing for want of power (by the code the study
    wrote)."""
    return {
        r.batch_size
        for r in result.sections.tables.c2
        if r.figure(key) is None and r.reason_of(key).code == ReasonCode.POWER_UNAVAILABLE
    }


def c2_tables(result: RunResult) -> dict[str, pd.DataFrame]:
    """Tables 1-3 in the paper's layout, measured beside published."""
    tables = result.sections.tables
    pub = pd.DataFrame(list(tables.published)).set_index("Batch size")
    rows = {r.batch_size: r for r in tables.c2}
    if not rows:
        return {}
    meas = pd.DataFrame(
        [{"batch_size": b, **{k: r.figure(k) for k in C2_FIGURES}} for b, r in rows.items()]
    )
    meas = meas.set_index("batch_size")
    out = {}
    for title, (col, key) in C2_TABLES.items():
        t = pd.DataFrame({"Published (C2 card)": pub[col], "Measured here": meas[key]})
        t["Measured (95 % CI)"] = [
            _c2_text(result, col, b, v, rows.get(b), key) + _flag(rows.get(b), key)
            for b, v in t["Measured here"].items()
        ]
        t["Measured / published"] = t["Measured here"] / t["Published (C2 card)"]
        out[title] = t.rename_axis("Batch size")
    return out


def _flag(row: C2Row | None, key: str) -> str:
    """' (indicative only: ...)' for a batch whose power window its sensor did not resolve."""
    flag = row.indicative_for(key) if row else ""
    return f" ({flag})" if flag else ""


def _c2_text(result: RunResult, figure: str, batch: int, value, row: C2Row | None, key: str) -> str:
    """'value ± half-width' or 'value [low, high]' (`Interval.shown`), or '— (why)' where the
    figure was not measured."""
    if value is None or pd.isna(value):
        return f"— ({(row.reason_for(key) if row else '') or 'batch not run'})"
    iv, _ = figure_interval(result, figure, batch, float(value))
    if iv is None or not iv.available:
        return f"{value:.4g} (no interval)"
    return Interval(float(value), iv.low, iv.high).text()


def plot_c2(result: RunResult):
    import matplotlib.pyplot as plt

    tables = c2_tables(result)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    for ax, (title, t) in zip(axes, tables.items(), strict=False):
        ax.plot(t.index, t["Published (C2 card)"], "o-", label="published (C2 card, IPU)")
        if t["Measured here"].notna().any():
            ax.plot(t.index, t["Measured here"], "s--", label="measured here")
        ax.set(xlabel="batch size", title=title.split(". ", 1)[1])
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- published figures --------------------------------------------------------------------------


def plot_published_c2():
    """The C2 paper's tables 1-3 against batch size."""
    import matplotlib.pyplot as plt

    t = published.c2_tables()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    for ax, col, unit in zip(
        axes, t.columns, ["ms per batch", "images/s", "images/s/W"], strict=True
    ):
        ax.plot(t.index, t[col], "o-")
        ax.set(xlabel="batch size", ylabel=unit, title=col)
    fig.tight_layout()
    return fig
