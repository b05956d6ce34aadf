"""What a report shows, read at a glance: its verdict sentence first, tables without a NaN or None
cell (a missing value is '—', an empty table one sentence saying why), the power said once.

Each `*_view` returns what a notebook cell displays: a DataFrame, or a `Sentence` (any object with
`_repr_html_` shows as HTML in JupyterLab and in the rendered report).
"""

from __future__ import annotations

import html

import pandas as pd

from kit.publish import glance
from kit.publish.card_table import scorecard_table
from kit.publish.report.plots import C2_TABLES, c2_tables, power_unavailable_batches
from kit.publish.report.provenance import error_banner, interpretation
from kit.publish.report.server import server_interpretation
from kit.publish.report.tables import (
    accuracy_table,
    bytemlperf_table,
    numerics_table,
    peaks_table,
    power_table,
    roofline_table,
    scorecard_rows,
    search_table,
    time_table,
)
from kit.results import ResultKind, ResultStatus, RunResult
from kit.results.sections import BackendInfo

POWER_COLUMNS = ["power (W)", "samples/s/W", "power method"]
NONE = "—"


class Sentence:
    """A paragraph of text (escaped) that displays as HTML."""

    def __init__(self, text: str, html_text: str | None = None):
        self.text = text
        self.html = html_text if html_text is not None else f"<p>{html.escape(text)}</p>"

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def view(table: pd.DataFrame, empty: str) -> pd.DataFrame | Sentence:
    """`table` with every missing cell as '—', or the sentence `empty` when it has no row."""
    if table.empty:
        return Sentence(empty)
    return table.astype(object).where(table.notna(), NONE)


def table_view(
    result: RunResult, name: str, table: pd.DataFrame, empty: str
) -> pd.DataFrame | Sentence:
    """`view` of the result's table `name`, or why it is not shown where its rows are in a form
    this kit does not read (`empty` would give a wrong reason)."""
    return unread_table(result, name) or view(table, empty)


def unread_table(result: RunResult, name: str) -> Sentence | None:
    """Why table `name` is not shown, where this kit could not read its rows; else None."""
    if name not in result.sections.tables.unread:
        return None
    return Sentence(
        f"The {name} table of this result is written in a form this kit does not read "
        "(another kit's rows): kept in the JSON as written, not shown."
    )


def opening(result: RunResult) -> str:
    """The first thing a report says (HTML): what failed, or its verdict sentence."""
    if result.status != ResultStatus.OK:
        return error_banner(result)
    sentence = (
        server_interpretation(result)
        if result.kind == ResultKind.SERVER_SCENARIO
        else interpretation(result)
    )
    return (
        "<div class='verdict' style='border-left:4px solid #1b6ac9;background:#f7f9fc;"
        f"padding:.2em .9em;margin:.5em 0 1em;font-size:110%'>{sentence}</div>"
    )


def power_unavailable(result: RunResult) -> str | None:
    """'power unavailable: <why>' when no timed window had its power measured (None when one
    had)."""
    powers = [m.power for m in result.sections.measurements]
    if any(p and p.measured for p in powers):
        return None
    reasons = list(dict.fromkeys((p.reason if p else None) or "not sampled" for p in powers)) or [
        "nothing was timed"
    ]
    return "power unavailable: " + "; ".join(reasons)


def latency_view(result: RunResult) -> pd.DataFrame | Sentence:
    """ByteMLPerf's columns and the kit's, without the power columns where no power was measured
    (the power section says why once)."""
    table = bytemlperf_table(result)
    if power_unavailable(result):
        table = table.drop(columns=[c for c in POWER_COLUMNS if c in table.columns])
    return view(
        table, "Nothing was timed: " + ("; ".join(result.errors) or "no batch size ran") + "."
    )


def power_view(result: RunResult) -> pd.DataFrame | Sentence:
    """One sentence when no power was measured; else the power per batch size."""
    unavailable = power_unavailable(result)
    if unavailable:
        return Sentence(unavailable[0].upper() + unavailable[1:] + ".")
    return view(power_table(result), "Nothing was timed, so no power was sampled.")


def numerics_view(result: RunResult) -> pd.DataFrame | Sentence:
    return view(
        numerics_table(result), "No numeric check in this run (check_numerics off, or nothing ran)."
    )


def search_view(result: RunResult) -> pd.DataFrame | Sentence:
    b = result.sections.backend or BackendInfo()
    chosen = f"{b.name} {b.precision} on {b.device}"
    why = (
        "Not searched: this run used the configuration its parameters name"
        if not result.parameters.get("search")
        else "The search left no candidate table (a decision reused from an older kit)"
    )
    return table_view(result, "search", search_table(result), f"{why} ({chosen}).")


def roofline_view(result: RunResult) -> pd.DataFrame | Sentence:
    return table_view(
        result,
        "roofline",
        roofline_table(result),
        "No roofline position: the run had no FLOP count or no peak "
        "for this device (or roofline=False).",
    )


def peaks_view(result: RunResult) -> pd.DataFrame | Sentence:
    return table_view(
        result, "peaks", peaks_table(result), "No nominal peak is known for this device."
    )


def accuracy_view(result: RunResult) -> pd.DataFrame | Sentence:
    return view(accuracy_table(result), "No accuracy check in this run (accuracy=False).")


def time_view(result: RunResult) -> pd.DataFrame | Sentence:
    return table_view(
        result,
        "time_account",
        time_table(result),
        "This result kept no account of its time (written by an older kit).",
    )


def beside_view(result: RunResult) -> Sentence:
    """This run's rows of the scorecard, as the index shows them (short reason, detail on click)."""
    rows = scorecard_rows(result)
    if rows.empty:
        return Sentence("This model has no published IPU row: nothing to set beside it.")
    records = rows.to_dict("records")
    return Sentence(glance.count_text(records), scorecard_table(records, interactive=False))


def c2_views(result: RunResult) -> list:
    """Tables 1-3 of the C2 study, each under its title, without a NaN cell; 'power unavailable',
    said per batch by table 3, becomes '—' and one sentence (the power section gives the reason)."""
    if unread := unread_table(result, "c2"):
        return [unread]
    out: list = []
    for title, table in c2_tables(result).items():
        shown = table.round(3)
        power = shown.index.isin(power_unavailable_batches(result, C2_TABLES[title][1]))
        shown.loc[power, "Measured (95 % CI)"] = NONE
        out += [
            Sentence(title, f"<h4>{html.escape(title)}</h4>"),
            view(shown, "No batch size ran."),
        ]
        if power.any():
            out.append(
                Sentence(
                    "Not measured here: power unavailable (the reason is under 'Power during the "
                    "runs')."
                )
            )
    return out
