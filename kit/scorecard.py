"""Build the scorecard: every published figure beside its measured twin, read from results JSON.

Reads only data/published and result JSON files, never a backend, so it runs anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit import published
from kit.compare import ACCURACY_METRICS, Comparison, Verdict, verdict
from kit.hardware import MeasuredOn
from kit.results import ResultKind, RunResult


def load_results(paths: list[Path]) -> list[tuple[Path, RunResult]]:
    out = []
    for p in paths:
        try:
            out.append((p, RunResult.read(p)))
        except (OSError, ValueError, KeyError):
            continue
    return out


def measured_on(result: RunResult) -> MeasuredOn:
    """Where a result's figures were measured, from its backend block."""
    return MeasuredOn.from_backend(result.backend, result.environment.get("cpu", {}).get("model", "?"))


def measured_hardware(result: RunResult) -> str:
    """The device's name and class, the backend and precision, and '[not run on an IPU]' where due."""
    on = measured_on(result)
    what = f"; {result.backend.get('name')} {result.backend.get('precision')}" if result.backend else ""
    if result.backend and result.backend.get("options", {}).get("compile"):
        what += " compiled"
    if result.tables.get("search_decision"):
        what += ", chosen by search"
    tail = " [not run on an IPU]" if on.emulated else ""
    return f"{on.name} ({on.hardware_class}{what}){tail}"


def _latest_ok(results: list[tuple[Path, RunResult]], kind: str, **match) -> tuple[Path, RunResult] | None:
    hits = [(p, r) for p, r in results if r.kind == kind and r.status == "ok"
            and all(r.parameters.get(k) == v for k, v in match.items())]
    return max(hits, key=lambda pr: pr[1].created_at) if hits else None


def _row(study, figure, model, precision, batch, unit, pub, published_study, meas, res, path, reason,
         source):
    on = measured_on(res) if res else None
    v, why, ratio = verdict(figure, pub, meas, published.study_part(published_study), on, reason)
    return Comparison(study, figure, model, precision, str(batch or ""), unit, pub,
                      published.study_hardware(published_study), meas,
                      measured_hardware(res) if res else "", v, why, ratio, source,
                      path.name if path else "")


def bytemlperf_rows(results) -> list[Comparison]:
    """The 14 headline rows (QPS + metric) and the per-batch report figures."""
    rows = []
    pub_study = "bytemlperf_c600"
    for _, r in published.headline_rows().iterrows():
        hit = _latest_ok(results, ResultKind.MODEL_BENCHMARK, model=r.model, published_precision=r.precision)
        path, res = hit if hit else (None, None)
        src = "seed 001 README table"
        qps, qbatch = best_qps(res)
        rows.append(_row("bytemlperf_c600", "QPS", r.model, r.precision, qbatch, "samples/s", r.qps, pub_study,
                         qps, res, path, "" if res else "row not run in this profile", src))
        value, reason = metric_value(res, r.metric)
        rows.append(_row("bytemlperf_c600", r.metric, r.model, r.precision, "", r.metric_unit,
                         r.metric_value, pub_study, value, res, path, reason, src))
        rows += per_batch_rows(r.model, r.precision, res, path, pub_study)
    return rows


def per_batch_rows(model, precision, res, path, pub_study) -> list[Comparison]:
    rep = published.reports()
    perf = rep[(rep["model"] == model) & (rep["precision"] == precision) & rep["batch"].notna()]
    by_batch = {m["batch_size"]: m for m in (res.measurements if res else [])}
    rows = []
    fields = {"Performance/QPS": ("QPS", "qps_bytemlperf", "samples/s"),
              "Performance/AVG Latency": ("AVG Latency", "mean_ms", "ms"),
              "Performance/P99 Latency": ("P99 Latency", "p99_bytemlperf_ms", "ms")}
    for _, f in perf.iterrows():
        name, key, unit = fields[f["metric"]]
        m = by_batch.get(int(f["batch"]))
        value = None if m is None else (m[key] if key in m else m["latency"][key])
        reason = "" if m else (f"batch {int(f['batch'])} not run" if res else "row not run in this profile")
        rows.append(_row("bytemlperf_reports", name, model, precision, int(f["batch"]), unit, f["number"],
                         pub_study, value, res, path, reason, "ByteMLPerf report JSON"))
    return rows


def best_qps(res: RunResult | None) -> tuple[float | None, int | None]:
    if not res or not res.measurements:
        return None, None
    best = max(res.measurements, key=lambda m: m["qps_bytemlperf"] or 0)
    return best["qps_bytemlperf"], best["batch_size"]


def metric_value(res: RunResult | None, metric: str) -> tuple[float | None, str]:
    if res is None:
        return None, "row not run in this profile"
    if metric in ACCURACY_METRICS:
        for a in res.accuracy:
            if a.get("metric") == metric and a.get("status") == "measured":
                return a["value"], ""
        statuses = [a.get("status", "") for a in res.accuracy if a.get("metric") == metric]
        weights = (res.model or {}).get("weights", {})
        if weights.get("source") == "random":
            return None, "random weights"
        return None, (statuses[0].removeprefix("not measured: ") if statuses else "no dataset")
    if metric == "Mean Diff":
        for a in res.accuracy:  # the fake-dataset check, like ByteMLPerf's
            if a.get("metric") == metric and a.get("value") is not None:
                return a["value"], ""
        if res.numerics:
            return res.numerics[-1]["mean_abs"], ""
    return None, "not computed"


def c2_rows(results) -> list[Comparison]:
    hit = _latest_ok(results, ResultKind.C2_STUDY)
    path, res = hit if hit else (None, None)
    table = {row["batch_size"]: row for row in (res.tables.get("c2", []) if res else [])}
    pub_study = "c2_qwant"
    rows = []
    for batch, pub in published.c2_tables().iterrows():
        m = table.get(int(batch), {})
        for figure, key, unit in (("Latency", "latency_ms", "ms/batch"),
                                  ("Throughput", "throughput", "images/s"),
                                  ("Energy efficiency", "efficiency", "images/s/W")):
            value = m.get(key)
            reason = m.get(f"{key}_reason", "") or ("" if res else "C2 study not run")
            rows.append(_row("c2_qwant", figure, "resnext101-c2", "FP16 (mixed)", batch, unit,
                             float(pub[figure]), pub_study, value, res, path, reason, "seed 003 tables 1-3"))
    return rows


def claim_rows() -> list[Comparison]:
    f = published.figures()
    claims = f[f["table"] == "claims"]
    return [Comparison(r.study, r.metric, r.model, "", "", r.unit, r.number, r.hardware, None, "",
                       Verdict.NOT_MEASURED, "training / price claim, outside an inference kit", None,
                       r.source) for r in claims.itertuples()]


def build(result_paths: list[Path]) -> pd.DataFrame:
    results = load_results(result_paths)
    rows = bytemlperf_rows(results) + c2_rows(results) + claim_rows()
    return pd.DataFrame([r.to_dict() for r in rows])


def summary_counts(card: pd.DataFrame) -> dict[str, int]:
    """How many figures got each verdict (every verdict listed, zeros included)."""
    counts = card["verdict"].map(str).value_counts()
    return {str(v): int(counts.get(str(v), 0)) for v in Verdict}


def result_paths(files: list[str]) -> list[Path]:
    """The given result files (relative to outputs/), or every JSON under outputs/runs/."""
    from kit.paths import outputs_dir

    out = outputs_dir()
    if files:
        return [out / f if not Path(f).is_absolute() else Path(f) for f in files]
    return sorted((out / "runs").glob("*/*.json"))


def interpretation(card: pd.DataFrame) -> str:
    counts = summary_counts(card)
    reproduced = counts.get("reproduced", 0)
    return (f"<p>{len(card)} published figures: {reproduced} reproduced, "
            f"{counts.get('not comparable', 0)} measured on other hardware (not comparable; the ratio "
            f"is shown), {counts.get('not measured', 0)} not measured (the reason is given per row). "
            "A figure counts as reproduced only when it was measured on the same part as published "
            "(a real C600 for the ByteMLPerf rows, a Mk1 C2 card for the C2 study; never a test double) "
            "and within the stated tolerance.</p>")


DISPLAY_COLUMNS = ["figure", "model", "precision", "batch_size", "published", "unit", "published_hardware",
                   "measured", "measured_hardware", "ratio", "verdict", "reason"]


def display_table(card: pd.DataFrame) -> pd.DataFrame:
    """The scorecard for reading: numbers to 4 significant digits, blanks instead of NaN."""
    out = card[DISPLAY_COLUMNS].copy()
    out["published"] = out["published"].map(lambda v: readable(v, 6))
    out["measured"] = out["measured"].map(lambda v: readable(v, 4))
    out["ratio"] = out["ratio"].map(lambda v: readable(v, 3))
    return out.reset_index(drop=True)


def readable(value, digits: int) -> str:
    """13,499 / 1,474.16 / 0.76963: thousands separated, small numbers to `digits` significant."""
    if value is None or pd.isna(value):
        return ""
    if abs(value) >= 1000:
        return f"{value:,.2f}".rstrip("0").rstrip(".") if digits > 4 else f"{value:,.0f}"
    return f"{value:.{digits}g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.2e}"


def build_and_record(result_files: list[str], given_path: str = "") -> pd.DataFrame:
    """The scorecard of `result_files` (default: every result under outputs/runs/), saved as the
    summary notebook's result JSON."""
    from kit.notebook import record

    card = build(result_paths(list(result_files)))
    record(ResultKind.SUMMARY, given_path, {"result_files": list(result_files)},
           counts=summary_counts(card), scorecard=card.to_dict("records"))
    return card


def header(card: pd.DataFrame) -> str:
    """The tolerances and the count of each verdict, as HTML."""
    import html

    from kit.compare import tolerance_statement

    counts = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in summary_counts(card).items())
    return f"<p>{html.escape(tolerance_statement())}</p><table>{counts}</table>"
