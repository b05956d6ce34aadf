"""The scorecard as an HTML table, the same on the index and in the summary and model reports: the
published figure with its batch and part beside the measured one with its batch and hardware, the
ratio, the verdict and the short reason once (the full reason on hover and on click); each row
links to the report of the result its figure comes from. Plain HTML and CSS: no remote scripts,
works offline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from kit.publish import glance
from kit.publish.compare import Comparison
from kit.publish.scorecard import measured_text, readable
from kit.published.studies import BYTEMLPERF_STUDIES, PublishedStudy
from kit.results import ResultKind

CARD_STYLE = """
.wide{overflow-x:auto;max-width:100%}
.wide table.card td,.wide table.card th{vertical-align:top;text-align:left}.wide table.card \
td.num{text-align:right}
table.card .sub{color:#666;font-size:85%}table.card summary{cursor:pointer}table.card \
td.why{max-width:26em}
.v-reproduced{color:#070;font-weight:bold}.v-differs{color:#a00;font-weight:bold}
.v-not-comparable{color:#555}.v-not-measured{color:#999}.v-failed{color:#a00}
@media (max-width:600px){.wide table.card td,.wide table.card th{padding:3px 4px;font-size:13px}}"""


COLUMNS = [
    ("figure", "Figure"),
    ("model", "Model, precision"),
    ("published", "Published (batch · part)"),
    ("measured", "Measured here, 95 % CI (batch · hardware)"),
    ("ratio", "Measured / published"),
    ("verdict", "Verdict"),
    ("reason", "Reason (click for the detail)"),
]
NUMERIC = {"published", "measured", "ratio"}
SHORT = 60  # a reason this long or shorter is shown as it is
OTHER = "other"  # study_table's group of the rows of no study in glance.STUDIES (the claims)


def scorecard_table(
    card: Sequence[glance.Row], links: dict[str, str] | None = None, interactive: bool = True
) -> str:
    """Every scorecard row: the published figure with its batch and part beside the measured one
    with its batch and hardware, the ratio, the verdict and the short reason (the full one on
    click or hover); each row links to its result's report where `links` has it (report_href).
    `interactive`: the index's table (click a header to sort, type to filter, pick a verdict)."""
    if not card:
        return "<p>Scorecard table: — (no scorecard in this batch: the summary job did not run)</p>"
    vendors = imported_backends(card)
    titles = [(t, k in NUMERIC) for k, t in COLUMNS] + [
        (f"{b}: its own ByteMLPerf report", True) for b in vendors
    ]
    head = "".join(
        f"<th data-col='{i}' data-type='{'num' if num else 'text'}'>{html.escape(t)}</th>"
        for i, (t, num) in enumerate(titles)
    )
    body = "".join(_row(Comparison.of(r), r, links or {}, vendors) for r in card)
    ident = " id='scorecard'" if interactive else ""
    table = (
        f"<div class='wide'><table{ident} class='card'><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )
    if not interactive:
        return f"<style>{CARD_STYLE}</style>{table}"
    verdicts = sorted({str(r.verdict) for r in glance.rows_of(card)})
    options = "".join(f"<option>{html.escape(v)}</option>" for v in verdicts)
    return (
        "<h2 id='scorecard-table'>Scorecard</h2><div class='filters'><input id='filter' "
        "type='search' size='30' placeholder='filter rows (model, figure, reason...)'> <select "
        f"id='verdict-filter'><option value=''>every verdict</option>{options}</select> <span "
        f"id='shown'>{len(card)} rows</span></div>" + table
    )


def report_href(row: glance.Row, links: dict[str, str]) -> str | None:
    """The href of the report behind a row: the report of the very result it read (`links` keyed
    by kit.publish.scorecard.result_key too), else (a row an older kit wrote) its job's, else, for a
    row that read no result (failed, not run), its model's job's latest report."""
    row = Comparison.of(row)
    if row.run_path:
        return links.get(row.run_path)
    if row.run:
        return links.get(row.run.removesuffix(".json"))
    study = row.study
    job = (
        ResultKind.C2_STUDY.value
        if study == PublishedStudy.C2_QWANT
        else f"{row.model}_{row.precision}"
        if study in BYTEMLPERF_STUDIES
        else None
    )
    if job is None:
        return None
    return links.get(job) or next(
        (h for name, h in sorted(links.items()) if name.startswith(f"{job}@")), None
    )


def _num(value) -> str:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return f" data-v='{float(value)!r}' class='num'" if ok else ""


def _sub(batch, where: str) -> str:
    text = " · ".join(x for x in (f"batch {batch}" if batch not in (None, "") else "", where) if x)
    return f"<br><span class='sub'>{html.escape(text)}</span>"


def imported_backends(card: Sequence[glance.Row]) -> list[str]:
    """The vendors whose ByteMLPerf reports `kit import-bytemlperf` brought in: the scorecard sets
    '<Backend> published' and '<Backend> source' beside its rows (imported_reports.with_columns)."""
    return sorted(
        {
            k.removesuffix(" published")
            for r in card
            if isinstance(r, Mapping)
            for k in r
            if k.endswith(" published") and f"{k.removesuffix(' published')} source" in r
        }
    )


def imported_cell(r: Mapping, backend: str, unit: str) -> str:
    """A vendor's own figure for the row, its report file (backend/model/file) under it, the full
    path on hover; '—' where the vendor published none. The vendors' columns are the record's
    (kit.publish.imported_reports.with_columns), not a Comparison's fields."""
    value, source = r.get(f"{backend} published"), str(r.get(f"{backend} source") or "")
    if glance.missing(value):
        return "<td>—</td>"
    return (
        f"<td{_num(value)} title='{html.escape(source)}'>"
        f"{html.escape(f'{readable(value, 6)} {unit}'.strip())}"
        f"{_sub(None, '/'.join(source.split('/')[-3:]))}</td>"
    )


def _row(
    r: Comparison, record: glance.Row, links: dict[str, str], vendors: Sequence[str] = ()
) -> str:
    unit = r.unit
    pub = readable(r.published, 6)
    published = (
        f"{html.escape(pub + ' ' + unit) if pub else '— (no published figure)'}"
        f"{_sub(r.batch_size, glance.published_part(r))}"
    )
    measured, title = "—", ""
    if r.measured is not None:
        measured = html.escape(measured_text(r)) + _sub(
            r.measured_batch or r.batch_size, glance.measured_device(r)
        )
        if r.measured_all_calls is not None:
            title = (
                f" title='over every call: {readable(r.measured_all_calls, 4)} {html.escape(unit)}'"
            )
    verdict = html.escape(str(r.verdict))
    href = report_href(r, links)
    label = html.escape(f"{r.model} {r.precision}".strip() or "—")
    model = f"<a href='{html.escape(href)}'>{label}</a>" if href else label
    vendor_cells = (
        "".join(imported_cell(record, b, unit) for b in vendors)
        if isinstance(record, Mapping)
        else ""
    )
    return (
        f"<tr data-verdict='{verdict}'><td>{html.escape(r.figure)}</td><td>{model}</td>"
        f"<td{_num(r.published)}>{published}</td>"
        f"<td{_num(None if measured == '—' else r.measured)}{title}>{measured}</td>"
        f"<td{_num(r.ratio)}>{html.escape(readable(r.ratio, 3) or '—')}</td>"
        f"<td class='v-{verdict.replace(' ', '-')}'>{verdict}</td><td class='why'>{reason_cell(r)}"
        f"</td>{vendor_cells}</tr>"
    )


def reason_cell(r: glance.Row) -> str:
    """The reason once: itself where it is short, else its short form with the full reason on
    hover (title) and on click (details)."""
    r = Comparison.of(r)
    short = glance.short_reason(r) + glance.flags(r)
    reason = r.reason
    if len(reason) <= SHORT:
        return html.escape(reason or short)
    return (
        f"<details><summary title='{html.escape(reason)}'>{html.escape(short)}</summary>"
        f"<span class='sub'>{html.escape(reason)}</span></details>"
    )


def study_table(card, study: PublishedStudy | str, links: dict[str, str] | None = None) -> str:
    """The rows of one study of a scorecard DataFrame as a table (`study` OTHER: every row of no
    study in glance.STUDIES, i.e. the claims); a sentence when it has none."""
    if study == OTHER:
        rows = card[~card.study.isin([s for s, _ in glance.STUDIES])]
    else:
        wanted = PublishedStudy.parse(study)
        rows = card[card.study == wanted]
    if rows.empty:
        return "<p>No figure of this study in the scorecard.</p>"
    return scorecard_table(rows.to_dict("records"), links, interactive=False)
