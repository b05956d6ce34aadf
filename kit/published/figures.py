"""The published figures (data/published/*.csv) as DataFrames, and an audit of their consistency.

>>> table = seed_table(PublishedStudy.BYTEMLPERF_C600); len(table)
14
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd

from kit.errors import UnknownNameError
from kit.paths import published_dir
from kit.published.schema import read_published_csv
from kit.published.studies import PublishedStudy

SEED_TABLES = {
    PublishedStudy.BYTEMLPERF_C600: "seed 001: ByteMLPerf IPU README (C600, PopRT 1.3/1.4, SDK "
    "3.3)",
    PublishedStudy.BYTEMLPERF_C600_OLDER: "seed 000: Byte MLPerf IPU page (older table)",
}
C2_TABLES = {"Table 1": "Latency", "Table 2": "Throughput", "Table 3": "Energy efficiency"}


def _read(name: str, directory: Path | None = None) -> pd.DataFrame:
    """The file's rows as strings, after checking them against its declared schema
    (kit.published.schema: an error names the file, the line and the column)."""
    return read_published_csv((directory or published_dir()) / name)


@functools.cache
def figures() -> pd.DataFrame:
    """Every seed figure: one row each, `value` numeric where the figure is a number."""
    df = _read("figures.csv")
    df["number"] = pd.to_numeric(df["value"], errors="coerce")
    return df


@functools.cache
def reports() -> pd.DataFrame:
    """The ByteMLPerf IPU report JSON figures per batch size (plus the README table rows)."""
    df = _read("bytemlperf_ipu_reports.csv")
    df["number"] = pd.to_numeric(df["value"], errors="coerce")
    df["batch"] = pd.to_numeric(df["batch_size"], errors="coerce").astype("Int64")
    return df


@functools.cache
def model_specs() -> pd.DataFrame:
    return _read("bytemlperf_model_specs.csv")


def seed_table(study: PublishedStudy | str) -> pd.DataFrame:
    """A ByteMLPerf table with the seed's own columns and printed values."""
    if study not in SEED_TABLES:
        raise UnknownNameError("seed table", study, SEED_TABLES)
    rows = figures()[figures()["study"] == study]
    out = []
    for (model, precision), group in rows.groupby(["model", "precision"], sort=False):
        qps = group[group["metric"] == "QPS"].iloc[0]
        metric = group[group["metric"] != "QPS"].iloc[0]
        out.append(
            {
                "Model name": model,
                "Precision": precision,
                "QPS": qps["printed"],
                "Dataset": qps["dataset"],
                "Metric name": metric["metric"],
                "Metric value": metric["printed"],
            }
        )
    return pd.DataFrame(out)


def c2_tables() -> pd.DataFrame:
    """The C2 study's tables 1-3 side by side: batch size, latency, throughput, efficiency."""
    f = figures()
    rows = f[(f["study"] == PublishedStudy.C2_QWANT) & f["table"].isin(list(C2_TABLES))]
    wide = rows.pivot(index="batch_size", columns="metric", values="number")
    wide.index = wide.index.astype(int)
    return wide.sort_index().rename_axis("Batch size")[list(C2_TABLES.values())]


def c2_latency_ms() -> dict[int, float]:
    """{card batch: ms per batch}: the C2 paper's Table 1."""
    return {int(b): float(ms) for b, ms in c2_tables()["Latency"].items()}


def c2_latency_source() -> str:
    f = figures()
    row = f[(f["study"] == PublishedStudy.C2_QWANT) & (f["table"] == "Table 1")].iloc[0]
    return f"{row['source']}, Table 1: {row['metric']}, {row['unit']}"


def c2_setup_value(metric: str) -> float:
    """A number of the C2 paper's setup (e.g. 'IPUs used', 'Card power')."""
    f = figures()
    setup = f[(f["study"] == PublishedStudy.C2_QWANT) & (f["table"] == "setup")]
    rows = setup[setup["metric"] == metric]
    if rows.empty:
        raise UnknownNameError("C2 setup figure", metric, setup["metric"])
    return float(rows.iloc[0]["number"])


def c2_ipus() -> int:
    """IPUs the C2 study ran in parallel, one session each (micro batch = batch / IPUs)."""
    return int(c2_setup_value("IPUs used"))


def study_hardware(study: PublishedStudy | str) -> str:
    """The hardware a published study ran on, as its source names it."""
    f = figures()
    rows = f[f["study"] == study]
    if rows.empty:
        raise UnknownNameError("published study", study, f["study"].unique())
    return rows.iloc[0]["hardware"]


def study_part(study: PublishedStudy | str) -> str | None:
    """The exact Graphcore part (a kit.hardware.parts.PARTS key) a study's figures came from."""
    return part_named_in(study_hardware(study))


PART_WORDS = (
    ("c600", ("C600", "ipu21")),
    ("gc2", ("GC2", "C2 card")),
    ("bow", ("Bow",)),
    ("m2000", ("M2000",)),
)


def part_named_in(text: str) -> str | None:
    """The Graphcore part a hardware description names (the first of PART_WORDS found), or None.

    >>> part_named_in("Graphcore C600 PCIe card"), part_named_in("NVIDIA A100")
    ('c600', None)
    """
    return next((key for key, words in PART_WORDS if any(w in text for w in words)), None)


def pack_mode_models() -> tuple[str, ...]:
    """Models whose published IPU rows ran in PopRT pack mode (a pack batch size in the spec)."""
    spec = model_specs()
    return tuple(spec[spec["ipu_pack_batch_size"].str.strip() != ""]["model"].drop_duplicates())


def c2_setup() -> pd.DataFrame:
    f = figures()
    setup = f[(f["study"] == PublishedStudy.C2_QWANT) & (f["table"] == "setup")]
    return setup[["metric", "printed", "unit", "note"]]


def headline_rows(study: PublishedStudy | str = PublishedStudy.BYTEMLPERF_C600) -> pd.DataFrame:
    """The rows of a ByteMLPerf seed table (seed 001's 14 by default; BYTEMLPERF_C600_OLDER for
    seed 000's 6) as numbers: model, precision, qps, metric, metric_value, dataset."""
    if study not in SEED_TABLES:
        raise UnknownNameError("seed table", study, SEED_TABLES)
    t = figures()[figures()["study"] == study]
    qps = t[t["metric"] == "QPS"].set_index(["model", "precision"])
    met = t[t["metric"] != "QPS"].set_index(["model", "precision"])
    return pd.DataFrame(
        {
            "qps": qps["number"],
            "metric": met["metric"],
            "metric_value": met["number"],
            "metric_unit": met["unit"],
            "dataset": qps["dataset"],
        }
    ).reset_index()


def ipu_run_settings(model: str, precision: str) -> dict:
    """Batch sizes, clients and QPS per batch of the published IPU run of one row."""
    r = reports()
    rows = r[
        (r["model"] == model)
        & (r["precision"] == precision)
        & r["metric"].str.startswith("Performance/")
    ]
    per_batch = rows.pivot(index="batch", columns="metric", values="number")
    spec = model_specs()[model_specs()["model"] == model]
    clients = pd.to_numeric(spec["ipu_clients"], errors="coerce").dropna()
    return {
        "batch_sizes": [int(b) for b in per_batch.index],
        "clients": int(clients.iloc[0]) if len(clients) else 1,
        "per_batch": per_batch.reset_index().to_dict("records"),
    }


def headline_batch(model: str, precision: str, qps: float) -> int | None:
    """The batch size the headline `qps` of a row was measured at: the report's batch whose QPS is
    nearest to it (resnet50 FP16: 13,499 in the README, 13,542 at batch 32 in the report)."""
    per_batch = [
        r
        for r in ipu_run_settings(model, precision)["per_batch"]
        if pd.notna(r.get("Performance/QPS"))
    ]
    if not per_batch:
        return None
    return int(min(per_batch, key=lambda r: abs(r["Performance/QPS"] / qps - 1))["batch"])


def poprt_version(model: str, precision: str) -> str:
    """The PopRT version ByteMLPerf's IPU README named when the row's report was published (or what
    the source says instead, e.g. 'latest (docker tag; version not stated)')."""
    r = reports()
    hit = r[
        (r["model"] == model)
        & (r["precision"] == precision)
        & (r["metric"] == "provenance/PopRT_version_in_IPU_README_at_that_commit")
    ]
    return str(hit["value"].iloc[0]) if len(hit) else "not stated"


def per_batch_table() -> pd.DataFrame:
    """The ByteMLPerf IPU report JSONs' performance figures, one row per model/precision/batch."""
    r = reports()
    perf = r[r["metric"].str.startswith("Performance/")]
    return perf.pivot_table(
        index=["model", "precision", "batch"], columns="metric", values="number"
    )


# --- audit -------------------------------------------------------------------------------------

BYTEMLPERF_DECIMALS = 5  # ByteMLPerf rounds every accuracy and diff figure to 5 decimals


def same_at_bytemlperf_precision(a: str, b: str) -> bool:
    """Equal once both are rounded to ByteMLPerf's 5 decimals (0.76824 and 0.7682 differ)."""
    return round(float(a), BYTEMLPERF_DECIMALS) == round(float(b), BYTEMLPERF_DECIMALS)


def audit_c2() -> pd.DataFrame:
    """Throughput = batch / latency, and the card power each row implies (throughput /
    efficiency)."""
    t = c2_tables().reset_index()
    t["Throughput from latency"] = t["Batch size"] / (t["Latency"] / 1000.0)
    t["Throughput gap %"] = 100.0 * (t["Throughput"] / t["Throughput from latency"] - 1.0)
    t["Implied card power W"] = t["Throughput"] / t["Energy efficiency"]
    return t


def audit_readme_vs_reports() -> pd.DataFrame:
    """Cells where the README table differs from its report JSON at ByteMLPerf's 5 decimals."""
    r = reports()
    readme = r[r["metric"].str.startswith("README table/") & (r["unit"] != "string")]
    out = []
    for _, row in readme.iterrows():
        name = row["metric"].split("/", 1)[1]
        scope = r[(r["model"] == row["model"]) & (r["precision"] == row["precision"])]
        if name == "QPS (headline)":
            perf = scope[scope["metric"] == "Performance/QPS"]
            best = perf.loc[perf["number"].idxmax()]
            report_value, where = (
                best["value"],
                f"Performance/QPS at batch {best['batch_size']} (max)",
            )
        else:
            match = scope[scope["metric"] == f"Accuracy/{name}"]
            if match.empty:
                continue
            report_value, where = match.iloc[0]["value"], f"Accuracy/{name}"
        out.append(
            {
                "model": row["model"],
                "precision": row["precision"],
                "figure": name,
                "README": row["value"],
                "report JSON": report_value,
                "JSON field": where,
                "agree": same_at_bytemlperf_precision(row["value"], report_value),
            }
        )
    return pd.DataFrame(out)


def audit_qps_formula() -> pd.DataFrame:
    """Published QPS vs clients x batch / AVG latency (ByteMLPerf's QPS is a window rate)."""
    r = reports()
    perf = r[r["metric"].isin(["Performance/QPS", "Performance/AVG Latency"]) & r["batch"].notna()]
    wide = perf.pivot_table(
        index=["model", "precision", "batch"], columns="metric", values="number"
    )
    wide = wide.reset_index()
    spec = model_specs().drop_duplicates("model").set_index("model")["ipu_clients"]
    wide["clients"] = wide["model"].map(
        lambda m: int(spec.get(m) or 1) if str(spec.get(m, "")).strip() else 1
    )
    wide["QPS from latency"] = (
        wide["clients"] * wide["batch"].astype(float) / (wide["Performance/AVG Latency"] / 1000)
    )
    wide["gap %"] = 100 * (wide["Performance/QPS"] / wide["QPS from latency"] - 1)
    return wide.rename(
        columns={"Performance/QPS": "QPS", "Performance/AVG Latency": "AVG latency ms"}
    )


def audit() -> dict[str, pd.DataFrame]:
    """All consistency checks, each a table; see the published_results notebook."""
    return {
        "c2": audit_c2(),
        "readme_vs_reports": audit_readme_vs_reports(),
        "qps_formula": audit_qps_formula(),
    }


def audit_findings() -> list[str]:
    """The audit as sentences."""
    a = audit()
    c2 = a["c2"]
    worst = c2.loc[c2["Throughput gap %"].abs().idxmax()]
    power = c2["Implied card power W"]
    bad = a["readme_vs_reports"][~a["readme_vs_reports"]["agree"]]
    qps = a["qps_formula"]
    pack_models = pack_mode_models()
    packed = qps["model"].isin(pack_models)
    worst_q = qps[~packed].loc[qps[~packed]["gap %"].abs().idxmax()]
    return [
        "C2 tables: throughput matches batch/latency within "
        f"{c2['Throughput gap %'].abs().max():.2f} % (largest gap at batch "
        f"{int(worst['Batch size'])}).",
        "C2 tables: the implied card power (throughput / efficiency) ranges "
        f"{power.min():.0f}-{power.max():.0f} W, below the card's stated "
        f"{c2_setup_value('Card power'):.0f} W.",
        f"ByteMLPerf: {len(bad)} README cells disagree with their report JSONs at ByteMLPerf's 5 "
        "decimals: "
        + "; ".join(
            f"{b.model} {b.precision} {b.figure} {b.README} vs {b['report JSON']}"
            for _, b in bad.iterrows()
        )
        + ".",
        "ByteMLPerf: published QPS vs clients x batch / AVG latency differ by up to "
        f"{worst_q['gap %']:.1f} % ({worst_q['model']} {worst_q['precision']} batch "
        f"{int(worst_q['batch'])}) outside pack mode.",
        f"ByteMLPerf pack-mode rows ({', '.join(pack_models)}) report "
        f"{qps[packed]['gap %'].min():.0f}-{qps[packed]['gap %'].max():.0f} % more QPS than that "
        "formula: their 'batch' is a pack of variable-length sequences, so the formula does not "
        "describe them.",
    ]


def ipu_model_settings(model: str) -> dict:
    """ByteMLPerf's IPU settings for `model` (its interact_infos JSON, verbatim), beside the
    fallbacks ByteMLPerf's IPU code applies (`defaults`) and where both come from.

    >>> ipu_model_settings("resnet50-torch-fp32")["settings"]["compiler_options"]["num_iotiles"]
    64
    """
    folder = published_dir() / "bytemlperf_ipu_settings"
    known = sorted(p.stem for p in folder.glob("*-fp32.json"))
    if model not in known:
        raise UnknownNameError("model with ByteMLPerf IPU settings", model, known)
    return {
        "model": model,
        "settings": json.loads((folder / f"{model}.json").read_text()),
        "defaults": json.loads((folder / "bytemlperf_defaults.json").read_text()),
        "source": f"bytedance/ByteMLPerf @ a30b4f9, backends/IPU/interact_infos/{model}.json",
    }
