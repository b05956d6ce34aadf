"""The figures a reader sees, without a browser (issue 33): the HTML scorecard of the index page,
the summary report and a model report are parsed and every number in them compared with the
result JSON it was made from. Only figures are checked, not layout: a table is found by its
"Published" and "Measured" headers, columns by words in their headers, and extra columns are
ignored. (pandas.read_html needs lxml or html5lib, which the kit does not install; the tables are
read with BeautifulSoup's stdlib parser instead.)"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from bs4 import BeautifulSoup

from kit.notebook import build_scorecard
from kit.publish.site import write_index
from tests.publish.test_scorecard_known_answers import MODEL, PRECISION, c600_run

NUMBER = re.compile(r"^-?[\d,]*\.?\d+(?:e[-+]?\d+)?")
BOUNDS = re.compile(r"\[(\S+), (\S+)\]")


def html_tables(html: str) -> list[pd.DataFrame]:
    """Every table with a header row, as text cells under its header texts (rows of another width,
    e.g. a caption row, are left out)."""
    out = []
    for table in BeautifulSoup(html, "html.parser").find_all("table"):
        rows = [
            [c.get_text(" ", strip=True) for c in tr.find_all(["th", "td"])]
            for tr in table.find_all("tr")
        ]
        rows = [r for r in rows if r]
        if len(rows) >= 2:
            out.append(
                pd.DataFrame([r for r in rows[1:] if len(r) == len(rows[0])], columns=rows[0])
            )
    return out


def column(df: pd.DataFrame, word: str, never=("/", "ratio", "all calls", "unit")) -> str | None:
    """The first column whose header holds `word` (any case) and none of `never`."""
    for c in df.columns:
        low = str(c).lower()
        if word in low and not any(n in low for n in never if n != word):
            return c
    return None


def figure_tables(html: str) -> list[pd.DataFrame]:
    """The tables with a published and a measured column (the scorecard's and its parts)."""
    return [t for t in html_tables(html) if column(t, "published") and column(t, "measured")]


def number(text: str) -> float | None:
    """The first number of a cell ('11,163 ± 2,700' -> 11163), None for '—' and empty cells."""
    m = NUMBER.match(text.strip())
    return float(m.group(0).replace(",", "")) if m else None


def blank(text: str) -> str:
    """'' for a cell shown as a dash."""
    return "" if text.strip() in ("—", "-", "") else text.strip()


def half_width(text: str) -> float | None:
    parts = text.split("±")
    return number(parts[1]) if len(parts) > 1 else None


def bounds(text: str) -> tuple[float | None, float | None] | None:
    """(low, high) of a cell that shows its interval as bounds ('19.91 [19.34, 19.91]')."""
    m = BOUNDS.search(text)
    return (number(m.group(1)), number(m.group(2))) if m else None


def interval_shown_like(text: str, value: float, low: float, high: float) -> bool:
    """Bounds as the record's; or '±' a half-width that is each side's distance from the value
    (to the two digits shown): never the larger side of an interval that is not symmetric."""
    shown = bounds(text)
    if shown is not None:
        return shown_like(shown[0], low, 1e-3) and shown_like(shown[1], high, 1e-3)
    return all(shown_like(half_width(text), side, 0.06) for side in (high - value, value - low))


def shown_like(shown: float | None, value: float | None, rel: float) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return shown is None
    return shown is not None and math.isclose(
        shown, value, rel_tol=rel, abs_tol=0.5 if abs(value) >= 1000 else 0
    )


def check_rows(table: pd.DataFrame, records: list[dict]) -> int:
    """Every row of `table` against its record: published, measured (± half-width), ratio,
    verdict."""
    keys = {k: column(table, k) for k in ("figure", "model", "precision", "verdict")}
    # a batch column of its own
    keys["batch"] = column(table, "batch", ("published", "measured", "/"))
    published, measured, ratio = (
        column(table, "published"),
        column(table, "measured"),
        column(table, "ratio", ()),
    )
    checked = 0
    for _, row in table.iterrows():
        match = [
            r
            for r in records
            if r["figure"] == row[keys["figure"]]
            and (
                keys["model"] is None
                or blank(row[keys["model"]]) in (r["model"], f"{r['model']} {r['precision']}")
            )
            and (
                keys["precision"] is None
                or keys["precision"] == keys["model"]
                or r["precision"] == blank(row[keys["precision"]])
            )
            and (keys["batch"] is None or str(r["batch_size"] or "") == blank(row[keys["batch"]]))
            # a headline and a per-batch QPS
            and shown_like(number(row[published]), r["published"], 1e-3)
        ]
        assert match, dict(row)
        r = match[0]
        assert shown_like(number(row[measured]), r["measured"], 1e-3), (dict(row), r["measured"])
        if r.get("measured_low") is not None and r["measured"] is not None:
            low, high = r["measured_low"], r["measured_high"]
            assert interval_shown_like(row[measured], r["measured"], low, high), (dict(row), r)
        if ratio is not None:
            assert shown_like(number(row[ratio]), r["ratio"], 6e-3), (dict(row), r["ratio"])
        if keys["verdict"] is not None:
            assert row[keys["verdict"]] == str(r["verdict"])
        checked += 1
    return checked


@pytest.fixture
def summary(tmp_path, monkeypatch):
    """A batch of the hand-made C600 run and its summary job's result JSON, under outputs/."""
    out = tmp_path / "outputs"
    (out / "runs" / "r1").mkdir(parents=True)
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    c600_run().write(out / "runs" / "r1" / f"{MODEL}_{PRECISION}.json")
    build_scorecard(
        [f"runs/r1/{MODEL}_{PRECISION}.json"], str(out / "runs" / "r1" / "summary.json")
    )
    record = {
        "name": "summary",
        "results": "runs/r1/summary.json",
        "html": "runs/r1/summary.html",
        "status": "ok",
        "duration_s": 1.0,
        "run_id": "r1",
    }
    return out, record


def test_the_index_scorecard_shows_the_result_jsons_figures(summary):
    out, record = summary
    index = write_index([record], out, profile="test", hardware="ipu")
    records = json.loads((out / record["results"]).read_text())["tables"]["scorecard"]
    tables = figure_tables(index.read_text())
    assert len(tables) == 1
    assert check_rows(tables[0], records) == len(records)
    mine = tables[0][tables[0][column(tables[0], "model")].isin([MODEL, f"{MODEL} {PRECISION}"])]
    verdict = column(tables[0], "verdict")
    assert set(mine[verdict]) >= {"reproduced", "differs"}  # the hand-made run reaches both


def test_the_parser_catches_a_wrong_figure(summary):
    """The check itself fails when a shown figure is not the JSON's."""
    out, record = summary
    records = json.loads((out / record["results"]).read_text())["tables"]["scorecard"]
    table = figure_tables(write_index([record], out).read_text())[0]
    wrong = [dict(r) for r in records]
    mine = next(
        r
        for r in wrong
        if r["model"] == MODEL
        and r["precision"] == PRECISION
        and r["figure"] == "QPS"
        and r["study"] == "bytemlperf_c600"
    )
    mine["measured"] *= 1.01
    with pytest.raises(AssertionError):
        check_rows(table, wrong)


@pytest.mark.slow
def test_the_summary_and_model_reports_show_the_result_jsons_figures(tmp_path, monkeypatch):
    """The notebooks run for real (a small ResNet-50 on this machine, then the summary), and their
    HTML reports are read back."""
    from kit.batch import Job
    from kit.batch.runner import run_jobs

    out = tmp_path / "outputs"
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    params = {
        "model": "resnet50-torch-fp32",
        "published_precision": "FP16",
        "small": True,
        "batch_sizes": [1, 32],
        "warmup": 1,
        "min_duration_s": 0.05,
        "min_count": 3,
        "target_ci": 0.0,
    }
    records = run_jobs(
        [
            Job("resnet50-torch-fp32_FP16", "model_benchmark.ipynb", params, 600),
            Job("summary", "summary.ipynb", {}, 300, after_all=True),
        ],
        out=out,
    )
    by_name = {r.name: r for r in records}
    assert all(r.status == "ok" for r in records), [(r.name, r.status, r.message) for r in records]
    card = json.loads((out / by_name["summary"].results).read_text())["tables"]["scorecard"]
    summary_tables = figure_tables((out / by_name["summary"].html).read_text())
    assert sum(check_rows(t, card) for t in summary_tables) == len(card)
    model = by_name["resnet50-torch-fp32_FP16"]
    mine = [
        r
        for r in card
        if r["model"] == "resnet50-torch-fp32"
        and r["precision"] == "FP16"
        and r["study"] in ("bytemlperf_c600", "bytemlperf_reports")
    ]
    report_tables = figure_tables((out / model.html).read_text())
    assert report_tables and sum(check_rows(t, mine) for t in report_tables) == len(mine)
    measured = {(r["figure"], r["batch_size"]): r["measured"] for r in mine}
    result = json.loads((out / model.results).read_text())
    at_32 = next(m for m in result["measurements"] if m["batch_size"] == 32)
    assert measured[("QPS", "32")] == pytest.approx(at_32["qps_bytemlperf"])
    assert measured[("AVG Latency", "32")] == pytest.approx(at_32["bytemlperf"]["avg_latency_ms"])


def test_half_width_and_number_parsing():
    assert number("11,163 ± 2,700") == 11163 and half_width("11,163 ± 2,700") == 2700
    assert bounds("13,499 [12,950, 14,100] batch 32") == (12950, 14100)
    assert bounds("11,163 ± 2,700") is None and half_width("19.91 [19.34, 19.91]") is None
    assert interval_shown_like("19.91 [19.34, 19.91]", 19.910343, 19.343117, 19.910343)
    # the larger side of an asymmetric interval shown as '±' (as the kit once did) is caught
    assert not interval_shown_like("19.91 ± 0.57", 19.910343, 19.343117, 19.910343)
    assert interval_shown_like("139.3 ± 49", 139.27, 90.5996, 187.945)
    assert (
        number("— (not measured)") is None
        and number("0.827") == 0.827
        and half_width("3.0") is None
    )
    assert Path(__file__).name == "test_rendered_values.py"
