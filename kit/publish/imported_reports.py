"""ByteMLPerf reports of any vendor, imported beside the scorecard as further published columns.

`import_reports(source, into)` checks every `<Backend>/<model>/result[-<precision>].json` under
`source` with ByteMLPerf's format reader (kit.published.bytemlperf_reports: the file and field
named on any error) and copies them, their diff-distribution PNGs too, under `into`
(outputs/imported/bytemlperf/ by default): imported reports live under outputs/, never in
data/published/, which stays the only source of the published figures the kit judges against.

`figures(folder)` flattens them, one row per figure with the file it came from; `with_columns`
sets them beside a scorecard's rows as `<Backend> published` / `<Backend> source` columns (same
model, figure and batch size; the vendor's own precision where it published another).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from kit.paths import imported_reports_dir
from kit.published import figures as published
from kit.published.bytemlperf_reports import (
    ReportError,
    flatten,
    precision_of,
    read_report,
    report_files,
)

#: The scorecard's names of ByteMLPerf's per-batch figures.
SCORECARD_FIGURES = {
    "Performance/QPS": "QPS",
    "Performance/AVG Latency": "AVG Latency",
    "Performance/P99 Latency": "P99 Latency",
}
#: Rows of data/published/bytemlperf_ipu_reports.csv that are not in the report files themselves.
NOT_IN_REPORTS = ("README table/", "provenance/")


def imported_dir() -> Path:
    return imported_reports_dir()


def import_reports(source: str | Path, into: str | Path | None = None) -> list[Path]:
    """Check every report under `source`, then copy each (and the PNGs beside it) to
    `into/<Backend>/<model>/`; returns the copies. Nothing is copied when any report is bad."""
    files = report_files(source)
    checked = [(f, read_report(f)) for f in files]  # every one checked before anything is copied
    into = Path(into) if into else imported_dir()
    copies = []
    for f, report in checked:
        folder = into / report["Backend"] / f.parent.name
        if not folder.resolve().is_relative_to(into.resolve()):
            # read_report refuses such names already
            raise ReportError(
                f, "field 'Backend'", f"is {report['Backend']!r}: it would write outside {into}"
            )
        folder.mkdir(parents=True, exist_ok=True)
        copies.append(Path(shutil.copy2(f, folder / f.name)))
        for png in f.parent.glob("*.png"):
            shutil.copy2(png, folder / png.name)
    return copies


def figures(folder: str | Path | None = None) -> pd.DataFrame:
    """Every figure of the reports under `folder` (default: the imported ones; none imported: an
    empty table): backend, model, precision, batch_size, metric, value, number, source."""
    folder = Path(folder) if folder else imported_dir()
    columns = ["backend", "model", "precision", "batch_size", "metric", "value", "number", "source"]
    if not folder.is_dir() or not any(folder.rglob("result*.json")):
        return pd.DataFrame(columns=columns)
    rows = []
    for f in report_files(folder):
        report = read_report(f)
        common = {
            "backend": report["Backend"],
            "model": f.parent.name,
            "precision": precision_of(f, report),
            "source": str(f),
        }
        for row in flatten(report):
            value = row["value"]
            number = (
                value if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
            rows.append(
                {
                    **common,
                    "batch_size": row["batch_size"],
                    "metric": row["metric"],
                    "value": value,
                    "number": number,
                }
            )
    return pd.DataFrame(rows, columns=columns)


def _same(csv_value: str, value: object) -> bool:
    if isinstance(value, dict | list):
        try:
            return json.loads(csv_value) == value
        except json.JSONDecodeError:
            return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(csv_value) == float(value)
        except ValueError:
            return False
    return str(csv_value) == str(value)


def check_against_published(found: pd.DataFrame) -> tuple[int, list[str]]:
    """(how many figures the kit's data/published/bytemlperf_ipu_reports.csv holds for the
    imported IPU reports and they match, one line per figure that differs or is missing on
    either side)."""
    held = published.reports()
    held = held[~held["metric"].str.startswith(NOT_IN_REPORTS) & (held["unit"] != "note")]
    ipu = found[found["backend"] == "IPU"]
    index = {
        (r.model, r.precision, r.metric, None if pd.isna(r.batch_size) else int(r.batch_size)): r
        for r in ipu.itertuples()
    }
    same, problems = 0, []
    for r in held.itertuples():
        batch = None if pd.isna(r.batch) else int(r.batch)
        hit = index.get((r.model, r.precision, r.metric, batch))
        where = f"{r.model} {r.precision} {r.metric}" + (f" batch {batch}" if batch else "")
        if hit is None:
            problems.append(f"{where}: {r.value} in data/published, not in the imported reports")
        elif not _same(str(r.value), hit.value):
            problems.append(f"{where}: {r.value} in data/published, {hit.value!r} in {hit.source}")
        else:
            same += 1
    held_keys = {
        (r.model, r.precision, r.metric, None if pd.isna(r.batch) else int(r.batch))
        for r in held.itertuples()
    }
    problems += [
        f"{k[0]} {k[1]} {k[2]}"
        + (f" batch {k[3]}" if k[3] else "")
        + f": {r.value!r} in {r.source}, "
        "not in data/published"
        for k, r in index.items()
        if k not in held_keys
    ]
    return same, problems


def with_columns(card: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """The scorecard with each imported backend's figure beside its per-batch rows (QPS, AVG and
    P99 Latency): `<Backend> published` (value) and `<Backend> source` (file, and the precision
    where the vendor published another than the row's)."""
    perf = found[found["metric"].isin(list(SCORECARD_FIGURES))]
    if perf.empty or card.empty:
        return card
    card = card.copy()
    for backend, rows in perf.groupby("backend", sort=True):
        values, sources = [], []
        for row in card.itertuples():
            value, source = _lookup(rows, row)
            values.append(value)
            sources.append(source)
        card[f"{backend} published"] = values
        card[f"{backend} source"] = sources
    return card


def _lookup(rows: pd.DataFrame, row) -> tuple[float | None, str]:
    try:
        batch = int(str(row.batch_size))
    except ValueError:  # a headline row without a batch size
        return None, ""
    hits = rows[
        (rows["model"] == row.model)
        & (rows["metric"].map(SCORECARD_FIGURES) == row.figure)
        & (pd.to_numeric(rows["batch_size"]) == batch)
    ]
    if hits.empty:
        return None, ""
    same = hits[hits["precision"] == row.precision]
    hit = (same if not same.empty else hits).iloc[0]
    note = "" if hit["precision"] == row.precision else f" ({hit['precision']})"
    return float(hit["number"]), f"{hit['source']}{note}"
