"""Tables, plots and provenance blocks the notebooks display, all built from a RunResult."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from kit import published, scorecard
from kit.compare import tolerance_statement
from kit.results import ResultKind, RunResult
from kit.stats import Interval


def bytemlperf_table(result: RunResult) -> pd.DataFrame:
    """ByteMLPerf's columns (BS, QPS, AVG and P99 latency) plus p50/p90 and the kit's own QPS, each
    as value ± half-width of its 95 % interval; the precision reached and the window's noise."""
    rows = [{"BS": m["batch_size"], "QPS": with_interval(m, "qps_bytemlperf", m["qps_bytemlperf"]),
             "AVG Latency (ms)": with_interval(m, "mean_ms", m["latency"]["mean_ms"]),
             "P99 Latency (ms)": with_interval(m, "p99_bytemlperf_ms", m["latency"]["p99_bytemlperf_ms"]),
             "p50 (ms)": with_interval(m, "p50_ms", m["latency"]["p50_ms"]),
             "p90 (ms)": with_interval(m, "p90_ms", m["latency"]["p90_ms"]),
             "samples/s (all calls / wall)": with_interval(m, "throughput", m["throughput"]),
             "calls": m["latency"]["count"], "threads": m["threads"],
             "precision (95 % CI)": precision_text(m.get("precision")), "noise": noise_text(m.get("noise")),
             **compute_columns(result, m), **power_columns(m.get("power"))}
            for m in result.measurements]
    return pd.DataFrame(rows)


def with_interval(m: dict, name: str, value: float | None, spec: str = ".4g") -> str:
    """'value ± half-width' of the measurement's interval `name`; '— (why)' without a value."""
    from kit.stats import Interval

    if value is None or pd.isna(value):
        return "— (not measured)"
    iv = Interval.from_dict((m.get("intervals") or {}).get(name))
    if iv is None or not iv.available:
        why = iv.reason if iv is not None else "not recorded"
        return f"{format(value, spec)} (no interval: {why})"
    return Interval(value, iv.low, iv.high).text(spec)


def precision_text(precision: dict | None) -> str:
    """'±3.1 % (target 5 %: met; 7 rounds; target reached)' or why there is none."""
    p = precision or {}
    if p.get("reached") is None:
        return "— (fewer than 2 rounds)"
    target = (f"target {p['target_ci']:.0%}: {'met' if p.get('met') else 'missed'}" if p.get("target_ci")
              else "no target")
    return f"±{p['reached']:.1%} ({target}; {p.get('rounds')} rounds; {p.get('stopped_by') or '?'})"


def noise_text(noise: dict | None) -> str:
    if not noise:
        return "— (not sampled)"
    if noise.get("noisy"):
        return "noisy: " + "; ".join(noise.get("reasons", []))
    return (f"quiet (steal {noise.get('steal_share', 0):.0%}, other load {noise.get('other_load', 0):.0%})"
            if "steal_share" in noise else "quiet (/proc/stat unreadable)")


def compute_columns(result: RunResult, m: dict) -> dict:
    """Achieved GFLOP/s (FLOPs counted from the ONNX graph) and the fraction of the device's peak."""
    flops = (result.model or {}).get("flops_per_sample")
    peak = ((result.backend or {}).get("device_info") or {}).get("peak") or {}
    if not flops or not m.get("throughput"):
        why = "— (no FLOP count)" if not flops else "— (no throughput)"
        return {"GFLOP/s": why, "% of peak": why}
    achieved = flops * m["throughput"] / 1e9
    share = 100 * achieved / peak["gflops"] if peak.get("gflops") else None
    return {"GFLOP/s": round(achieved, 1),
            "% of peak": "— (no peak for this device)" if share is None else round(share, 1)}


def power_columns(power: dict | None) -> dict:
    """Mean power and efficiency with the method that produced them (or why there are none)."""
    if not power or power.get("method") != "measured":
        reason = (power or {}).get("reason") or "not sampled"
        return {"power (W)": f"— ({reason})", "samples/s/W": f"— ({reason})",
                "power method": f"unavailable: {reason}"}
    short = (" (window shorter than the sensor resolves: indicative only)"
             if power.get("window_resolved") is False else "")
    return {"power (W)": round(power["mean_w"], 2), "samples/s/W": round(power["samples_per_s_per_w"], 3),
            "power method": f"measured: {power.get('sensor')}{short}"}


def numerics_table(result: RunResult) -> pd.DataFrame:
    cols = ["batch_size", "mean_abs", "std_abs", "max_abs", "mean_rel", "max_rel", "nan_count",
            "inf_count", "reference"]
    return pd.DataFrame(result.numerics, columns=cols)


def accuracy_table(result: RunResult) -> pd.DataFrame:
    """The published accuracy (or numeric) metric: value and status, or why it is not measured."""
    cols = ["metric", "value", "status", "dataset", "data_percent"]
    return pd.DataFrame([{c: a.get(c) for c in cols} for a in result.accuracy], columns=cols)


def power_table(result: RunResult) -> pd.DataFrame:
    """Mean power and efficiency per batch size, with the sensor or the reason there is none.

    With replicas the batch is the paper's: micro batch x replicas."""
    return pd.DataFrame([{"batch_size": m["batch_size"] * (m["threads"] if m["mode"] == "replicas" else 1),
                          **power_columns(m.get("power"))} for m in result.measurements])


def beside_published(result: RunResult, path: Path | None = None) -> pd.DataFrame:
    """This run's rows of the scorecard, formatted for reading."""
    cols = ["figure", "batch_size", "published", "unit", "published_hardware", "measured",
            "measured_hardware", "ratio", "verdict", "reason"]
    rows = scorecard_rows(result, path)
    return scorecard.display_table(rows)[cols] if not rows.empty else pd.DataFrame(columns=cols)


def scorecard_rows(result: RunResult, path: Path | None = None) -> pd.DataFrame:
    """This run's rows of the scorecard, as numbers."""
    p = path or Path("this-run.json")
    if result.kind == ResultKind.C2_STUDY:
        rows = scorecard.c2_rows([(p, result)])
    else:
        rows = [r for r in scorecard.bytemlperf_rows([(p, result)])
                if r.model == result.parameters.get("model")
                and r.precision == result.parameters.get("published_precision")]
    return pd.DataFrame([r.to_dict() for r in rows])


METHODS = {
    "model_benchmark": "warm-up (outside the timed and power window), then calls in rounds until the "
                       "minimum duration AND count are met and, with a target, until the throughput's 95 % "
                       "interval is that narrow (or the time limit passes); 95 % intervals from the rounds "
                       "(ratio estimator, t quantile; Woodruff for percentiles), never from single calls; "
                       "CPU steal, other processes' load and frequency sampled over the window; power "
                       "sampled over exactly the timed calls; per-call "
                       "perf_counter_ns; QPS by ByteMLPerf's formula (20 calls dropped at each end per "
                       "thread); raw call times kept in the results JSON",
    "c2_study": "the Qwant protocol, warm-up outside the timed and power window: each replica's call "
                "preprocesses its micro batch of real images, "
                "runs it and fetches the outputs; replicas run in parallel threads; latency = mean call "
                "time; throughput = batch / latency; raw call times kept in the results JSON",
    "server_scenario": "MLPerf LoadGen (Poisson arrivals at each offered QPS) through the kit's dynamic "
                       "batcher; p99 from LoadGen's summary; LoadGen logs kept beside the results JSON",
}


def provenance(result: RunResult) -> str:
    """An HTML block: what ran where, with which software, weights and method."""
    env = result.environment
    b = result.backend or {}
    m = result.model or {}
    items = {
        "Status": result.status + ("" if not result.errors else f" ({'; '.join(result.errors)})"),
        "Hardware": f"{env.get('cpu', {}).get('model')} ({env.get('cpu', {}).get('cores')} cores)"
                    + (f"; GPUs: {', '.join(env['gpus'])}" if env.get("gpus") else "")
                    + ("; IPU present" if env.get("ipu_present") else "; no IPU on this machine"),
        "Backend": f"{b.get('name')} precision {b.get('precision')} on {b.get('device')}"
                   + (f" ({(b.get('device_info') or {}).get('name')})" if b else ""),
        "Session": ", ".join(f"{k}={v}" for k, v in (b.get("session") or {}).items()),
        "Model": f"{m.get('name')} ({m.get('params') or '?'} parameters, "
                 f"{(m.get('flops_per_sample') or 0) / 1e9:.2f} GFLOP/sample) from "
                 f"{m.get('onnx_file') or Path(m.get('onnx_path') or '?').name}",
        "Weights": (m.get("weights") or {}).get("label", ""),
        "Software": ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items()),
        "Parameters": ", ".join(f"{k}={v}" for k, v in result.parameters.items()),
        "Method": METHODS.get(result.kind, METHODS["model_benchmark"]),
        "Peak used for '% of peak'": ((b.get("device_info") or {}).get("peak") or {}).get("method", ""),
        "Measured at": result.created_at,
    }
    for note in result.notes:
        items.setdefault("Notes", "")
        items["Notes"] += note + " "
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(str(v))}</td></tr>" for k, v in items.items() if v)
    return f"<table>{rows}</table><p><em>{html.escape(tolerance_statement())}</em></p>"


def error_banner(result: RunResult) -> str:
    if result.status == "ok" and not result.errors:
        return ""
    lines = "".join(f"<li>{html.escape(e)}</li>" for e in result.errors)
    return f"<div style='color:#a00;font-weight:bold'>Run {html.escape(result.status)}:<ul>{lines}</ul></div>"


def plot_batches(result: RunResult):
    """Latency and throughput against batch size, with 95 % intervals as error bars, beside the
    published IPU per-batch figures of the same row (ByteMLPerf's report JSON), on log axes."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    ms = sorted(result.measurements, key=lambda m: m["batch_size"])
    if ms:
        bs = [m["batch_size"] for m in ms]
        for ax, key, fmt, label in ((a, "mean_ms", "o-", "mean, measured here"),
                                    (a, "p99_bytemlperf_ms", "s--", "p99, measured here"),
                                    (b, "qps_bytemlperf", "o-", "measured here")):
            values = [m["qps_bytemlperf"] if key == "qps_bytemlperf" else m["latency"][key] for m in ms]
            ax.errorbar(bs, values, yerr=_error_bars(ms, key, values), fmt=fmt, capsize=3, label=label)
    pub = published_per_batch(result)
    if not pub.empty:
        a.plot(pub["batch"], pub["Performance/AVG Latency"], "^-", color="C2", label="mean, published IPU")
        a.plot(pub["batch"], pub["Performance/P99 Latency"], "v:", color="C3", label="p99, published IPU")
        b.plot(pub["batch"], pub["Performance/QPS"], "^-", color="C2", label="published IPU (C600)")
    a.set(xlabel="batch size", ylabel="latency (ms)", title="Latency per call", xscale="log", yscale="log")
    b.set(xlabel="batch size", ylabel="samples/s", title="Throughput (QPS)", xscale="log", yscale="log")
    for ax in (a, b):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _error_bars(ms: list[dict], key: str, values: list[float]) -> list[list[float]]:
    low, high = [], []
    for m, v in zip(ms, values, strict=True):
        iv = (m.get("intervals") or {}).get(key) or {}
        lo, hi = iv.get("low"), iv.get("high")
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


def c2_tables(result: RunResult) -> dict[str, pd.DataFrame]:
    """Tables 1-3 in the paper's layout, measured beside published."""
    pub = pd.DataFrame(result.tables.get("published", [])).set_index("Batch size")
    meas = pd.DataFrame(result.tables.get("c2", []))
    if meas.empty:
        return {}
    meas = meas.set_index("batch_size")
    out = {}
    for title, col, key in (("Table 1. Latency (ms per batch)", "Latency", "latency_ms"),
                            ("Table 2. Throughput (images/s)", "Throughput", "throughput"),
                            ("Table 3. Energy efficiency (images/s/W)", "Energy efficiency", "efficiency")):
        t = pd.DataFrame({"Published (C2 card)": pub[col], "Measured here": meas[key]})
        t["Measured ± 95 % CI"] = [_c2_text(result, col, b, v, meas.get(f"{key}_reason"))
                                   for b, v in t["Measured here"].items()]
        t["Measured / published"] = t["Measured here"] / t["Published (C2 card)"]
        out[title] = t.rename_axis("Batch size")
    return out


def _c2_text(result: RunResult, figure: str, batch: int, value, reasons) -> str:
    """'value ± half-width', or '— (why)' where the figure was not measured."""
    from kit.intervals import figure_interval

    if value is None or pd.isna(value):
        reason = reasons.get(batch) if reasons is not None and batch in reasons else None
        return f"— ({reason if isinstance(reason, str) and reason else 'batch not run'})"
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


def interpretation(result: RunResult) -> str:
    """One or two sentences saying what the run shows, for the end of a notebook."""
    if result.status != "ok":
        return f"<p>This run did not complete: {html.escape('; '.join(result.errors))}</p>"
    card = scorecard_rows(result)
    hw = (result.backend or {}).get("device_info", {}).get("name", "this machine")
    weights = (result.model or {}).get("weights", {})
    parts = []
    if result.kind == ResultKind.C2_STUDY:
        rows = result.tables.get("c2", [])
        if rows:
            best = max(rows, key=lambda r: r["throughput"])
            pub = published.c2_tables()
            parts.append(f"On {hw}, the C2 protocol peaked at {best['throughput']:.1f} images/s "
                         f"(batch {best['batch_size']}), against {pub['Throughput'].max():.2f} images/s "
                         "published for the C2 card; lowest latency "
                         f"{min(r['latency_ms'] for r in rows):.2f} ms per batch against "
                         f"{pub['Latency'].min():.2f} ms.")
            first = rows[0]
            parts.append(f"Energy efficiency: measured by {first['power_sensor']}." if first.get("power_sensor")
                         else f"Energy efficiency not measured: {first.get('efficiency_reason', 'no sensor')}.")
    else:
        qps = card[card["figure"] == "QPS"] if not card.empty else card
        if not qps.empty and qps.iloc[0]["measured"] is not None:
            q = qps.iloc[0]
            parts.append(f"On {hw}, {result.parameters.get('model')} reached {q['measured']:.1f} samples/s "
                         f"(batch {q['batch_size']}); the published IPU row reports {q['published']:,.0f} "
                         f"samples/s: verdict <b>{html.escape(q['verdict'])}</b>.")
        elif result.measurements:
            best = max(result.measurements, key=lambda m: m["qps_bytemlperf"] or 0)
            parts.append(f"On {hw}, {html.escape(str(result.parameters.get('model')))} reached "
                         f"{best['qps_bytemlperf']:.1f} samples/s (batch {best['batch_size']}); there is no "
                         "published IPU figure for this model, so nothing is compared (not comparable).")
    if weights.get("source") == "random":
        parts.append("Weights are random, so accuracy figures are not meaningful and are marked "
                     "'not measured'. Timings do not depend on the weights' values, but numeric diffs do: "
                     "a diff from random weights only says how far this backend's arithmetic drifts from "
                     "the fp32 CPU run on untrained activations, whose scale differs from the trained "
                     "model's, so it is not compared with the published Mean Diff.")
    return "<p>" + " ".join(parts) + "</p>"


# --- server scenario ----------------------------------------------------------------------------

def server_tables(result: RunResult) -> dict[str, pd.DataFrame]:
    """The server study's tables (fixed_batch, probes, best, simulated_curve, c2_prediction)."""
    return {k: pd.DataFrame(v) for k, v in result.tables.items()}


def server_best(result: RunResult) -> pd.DataFrame:
    """Per policy: LoadGen's highest passing QPS beside the simulator's prediction."""
    cols = ["policy", "loadgen_best_qps", "loadgen_p99_ms", "loadgen_result", "loadgen_reasons",
            "sim_best_qps", "prediction_error_pct", "capacity_qps"]
    best = server_tables(result).get("best", pd.DataFrame())
    return best[cols] if not best.empty else pd.DataFrame(columns=cols)


def server_c2_prediction(result: RunResult) -> pd.DataFrame:
    """What the C2 card would sustain (a PREDICTION), or the note saying why it was skipped."""
    tables = server_tables(result)
    return tables.get("c2_prediction", pd.DataFrame({"note": [n for n in result.notes if "C2" in n]}))


def plot_server(result: RunResult):
    """p99 latency against offered load: LoadGen probes and the simulated curve per policy."""
    import matplotlib.pyplot as plt

    tables = server_tables(result)
    fig, ax = plt.subplots(figsize=(7, 4))
    probes, curve = tables.get("probes", pd.DataFrame()), tables.get("simulated_curve", pd.DataFrame())
    for i, (policy, rows) in enumerate(probes.groupby("policy", sort=False) if not probes.empty else []):
        sim = curve[curve.policy == policy]
        ax.plot(sim.offered_qps, sim.sim_p99_ms, "--", color=f"C{i}", label=f"{policy} simulated")
        ax.plot(rows.offered_qps, rows.loadgen_p99_ms, "o", color=f"C{i}", label=f"{policy} LoadGen")
    bound = result.parameters.get("latency_bound_ms")
    if bound:
        ax.axhline(bound, color="k", lw=0.8)
    p = result.parameters
    ax.set(xlabel="offered QPS (Poisson)", ylabel="p99 latency (ms)", yscale="log",
           title=f"{p.get('model')} on {p.get('backend')} {p.get('precision')}: p99 vs offered load")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return fig


def server_interpretation(result: RunResult) -> str:
    """The best policy in one sentence, or why none kept p99 under the bound."""
    if result.status != "ok":
        return f"<p>This run did not complete: {html.escape('; '.join(result.errors))}</p>"
    best = server_best(result).dropna(subset=["loadgen_best_qps"])
    bound = result.parameters.get("latency_bound_ms")
    if best.empty:
        return (f"<p>No policy kept p99 under {bound:g} ms on this hardware, even at the lowest rate "
                "probed.</p>")
    top = best.loc[best.loadgen_best_qps.idxmax()]
    err = top.prediction_error_pct
    tail = f" ({err:+.0f} %)." if pd.notna(err) else "."
    return (f"<p>Best policy {html.escape(top.policy)}: {top.loadgen_best_qps:.3g} QPS with p99 "
            f"{top.loadgen_p99_ms:.0f} ms (LoadGen {html.escape(str(top.loadgen_result))}); the "
            f"simulation predicted {top.sim_best_qps:.3g} QPS{tail}</p>")


# --- published figures --------------------------------------------------------------------------

def plot_published_c2():
    """The C2 paper's tables 1-3 against batch size."""
    import matplotlib.pyplot as plt

    t = published.c2_tables()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    for ax, col, unit in zip(axes, t.columns, ["ms per batch", "images/s", "images/s/W"], strict=True):
        ax.plot(t.index, t[col], "o-")
        ax.set(xlabel="batch size", ylabel=unit, title=col)
    fig.tight_layout()
    return fig
