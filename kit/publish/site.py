"""outputs/index.html: every report of the latest batch with status, time, hardware, scorecard.

Reads only outputs/state.json and result JSON files.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from kit import atomic
from kit.batch.past_runs import ran_and_reused
from kit.batch.state import RERUN_OF, is_rerun, read_state
from kit.batch.status import FINISHED_RUNS, BatchRunStatus, JobStatus
from kit.errors import KitError
from kit.hardware.gpu_verified import gpu_paths_statement
from kit.measure.time_account import by_phase
from kit.paths import outputs_dir
from kit.publish import glance
from kit.publish.card_table import scorecard_table
from kit.publish.index_content import SCRIPT, STYLE_EXTRA, headline_chart
from kit.publish.peers_table import peers_section
from kit.results import ResultKind, RunResult, Sections, version_problem
from kit.results.tables import TimeAccount

STYLE = (
    """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px \
8px;text-align:left}
th{background:#f0f0f0}.ok{color:#070}.error,.failed,.timeout,.killed,.interrupted{color:#a00;font-weight:bold}
.reused{color:#666;font-size:90%}code{background:#f6f6f6;padding:1px 3px}"""
    + STYLE_EXTRA
)


def _cell(value: object) -> str:
    return f"<td>{html.escape(str(value))}</td>"


def scorecard_summary(out: Path, records: list[dict], card: list[dict]) -> str:
    """The top of the index: one sentence per study and the counts with their reasons grouped."""
    summary = next((r for r in records if r["name"] == ResultKind.SUMMARY), None)
    full = summary["html"] if summary and (out / summary["html"]).exists() else ""
    return glance.overview_html(card, full)


def report_links(out: Path, records: list[dict], card: Sequence[Mapping] = ()) -> dict[str, str]:
    """Job name -> its report's href (relative to outputs/), for the reports that exist: the
    state's latest record of each job, the batch's `records` before them; and each scorecard row's
    result (its `run_path`) -> the report beside that result, which the row links to."""
    try:
        latest = list(read_state(out)["jobs"].values())
    except KitError:  # a corrupt state only costs the links of jobs outside this batch
        latest = []
    links = {r["name"]: r["html"] for r in [*latest, *records] if (out / r["html"]).exists()}
    for row in card:
        key = str(row.get("run_path") or "")
        page = (out / key).with_suffix(".html")  # an absolute key stays itself
        if key and page.exists():
            links[key] = Path(os.path.relpath(page, out)).as_posix()
    return links


def scorecard_records(out: Path, records: list[dict]) -> list[dict]:
    """The summary job's scorecard rows (empty when the batch has none)."""
    summary = next((r for r in records if r["name"] == ResultKind.SUMMARY), None)
    if not summary or not (out / summary["results"]).exists():
        return []
    try:
        return [dict(row) for row in RunResult.read(out / summary["results"]).tables.scorecard]
    except KitError:  # a summary this kit cannot read: its report says so
        return []


def comparisons(out: Path) -> str:
    pages = sorted((out / "compare").glob("*.html")) if (out / "compare").exists() else []
    if not pages:
        return ""
    items = "".join(
        f"<li><a href='compare/{html.escape(p.name)}'>{html.escape(p.stem)}</a></li>" for p in pages
    )
    return f"<h2>Run comparisons (kit compare)</h2><ul>{items}</ul>"


def stored_sections(out: Path, record: dict) -> Sections | None:
    """The job's result read back as records; None where it is gone or this kit cannot read it."""
    try:
        return RunResult.read(out / record["results"]).sections
    except (OSError, ValueError, KeyError, TypeError, KitError):
        return None


def peak_memory(sections: Sections | None) -> str:
    """The job's peak resident memory from its result (`resources`), e.g. '1.8 GB', '1.4 GB (warm
    kernel)' where the batch's warm kernel ran it (the peak counts from what earlier jobs left), or
    '—'."""
    resources = sections.resources if sections else None
    if resources is None or not resources.peak_rss_bytes:
        return "—"
    warm = " (warm kernel)" if resources.in_warm_kernel else ""
    return f"{resources.peak_rss_bytes / 1e9:.1f} GB{warm}"


def time_split(account: TimeAccount, job_seconds: float | None = None) -> str:
    """Where the job's seconds went, by phase (kit.measure.time_account), e.g. 'export 12 · search
    38 · timing 130 · other 2 · outside the study 9' (the notebook's kernel, imports, writing and
    rendering: the job's seconds less the study's); '—' for a result that kept no account."""
    try:
        split = by_phase(account.raw) or ({"study": account.total_s} if account.total_s else {})
        if split and isinstance(job_seconds, int | float):
            if account.total_s is None:  # a missing total is no zero: nothing said
                return "—"
            if job_seconds > account.total_s:
                split["outside the study"] = job_seconds - account.total_s
        return " · ".join(f"{name} {seconds:.0f}" for name, seconds in split.items()) or "—"
    except (KeyError, TypeError, AttributeError, ValueError):
        return "—"


def _shown_status(out: Path, record: dict) -> str:
    """The record's status, but never 'ok' for a job whose report or results are gone from disk
    (deleted by hand, or by a clean under an older kit) or whose result this kit cannot read: an
    ok with nothing usable behind it misleads."""
    gone = [
        what
        for what, key in (("report", "html"), ("results", "results"))
        if not (out / record[key]).exists()
    ]
    if record["status"] != JobStatus.OK:
        return record["status"]
    if gone:
        return f"missing: its {' and '.join(gone)} are not in {out.name}/ (run it again)"
    if problem := result_problem(out / record["results"]):
        return f"unreadable: {Path(record['results']).name}: {problem} (run it again)"
    return record["status"]


def result_problem(path: Path) -> str | None:
    """Why this kit cannot read the result JSON at `path` (not JSON, another schema_version, a
    section of another shape: what the scorecard would find reading it), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"not a readable JSON file ({type(exc).__name__})"
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not a result"
    if problem := version_problem(data):
        return problem
    try:
        RunResult.from_dict(data)
    except KitError as exc:
        return str(exc)
    return None


def unreadable(out: Path, records: list[dict]) -> list[str]:
    """'<results path>: <why>' for each ok record whose result JSON this kit cannot read."""
    return [
        f"{out / r['results']}: {problem}"
        for r in records
        if r["status"] == JobStatus.OK
        and (out / r["results"]).exists()
        and (problem := result_problem(out / r["results"]))
    ]


def _notebooks(n: int) -> str:
    return f"{n} notebook{'' if n == 1 else 's'}"


def run_kept(out: Path, run: dict) -> str:
    """One run in the index's list: how many of its notebooks ran there and how many it reused (a
    folder of reused ones holds only its batch.run), or the result a `kit rerun` ran again."""
    counts = ran_and_reused(out, run)
    if is_rerun(run):
        what = f"re-run of {run[RERUN_OF]}: {_notebooks(counts.ran)} run"
    else:
        what = f"{_notebooks(len(run['jobs']))}: {counts.ran} run, {counts.reused} reused"
    return (
        f"<li><code>runs/{html.escape(run['run_id'])}/</code> ({html.escape(what)}, "
        f"{html.escape(run.get('status', 'complete'))}, finished "
        f"{html.escape(run.get('finished_at') or '-')})</li>"
    )


def write_index(
    records: list[dict], out: Path | None = None, *, profile: str = "", hardware: str = ""
) -> Path:
    """Write outputs/index.html atomically; an empty batch never replaces the index."""
    out = out or outputs_dir()
    if not records:
        raise KitError(f"no notebooks to index: {out / 'index.html'} is left as it was")
    rows = []
    for r in records:
        link = (
            f"<a href='{html.escape(r['html'])}'>{html.escape(r['name'])}</a>"
            if (out / r["html"]).exists()
            else html.escape(r["name"])
        )
        data = (
            f"<a href='{html.escape(r['results'])}'>JSON</a>"
            if (out / r["results"]).exists()
            else ""
        )
        reused = (
            f" <span class='reused'>(reused from run {r['run_id']})</span>"
            if r.get("reused")
            else ""
        )
        moved = f" <span class='reused'>({html.escape(r['note'])})</span>" if r.get("note") else ""
        status = _shown_status(out, r)
        stored = stored_sections(out, r)
        account = stored.tables.time_account if stored else TimeAccount()
        rows.append(
            f"<tr><td>{link}{reused}</td><td class='{status.split(':')[0]}'>{status}{moved}</td>"
            f"{_cell(r['duration_s'])}{_cell(time_split(account, r['duration_s']))}"
            f"{_cell(peak_memory(stored))}{_cell(r.get('hardware', ''))}{_cell(r.get('host', ''))}"
            f"<td>{data}</td>{_cell(r.get('message', ''))}</tr>"
        )
    try:
        state = read_state(out)
    except KitError:  # a corrupt state only costs the list of runs here
        state = {"runs": []}
    runs = "".join(run_kept(out, x) for x in reversed(state["runs"][-20:]))
    card = scorecard_records(out, records)
    page = f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>ipu-repro reports</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head><body>
<h1>ipu-repro: published Graphcore IPU inference results, reproduced here</h1>
{scorecard_summary(out, records, card)}
<p>Profile <code>{html.escape(profile)}</code>, hardware <code>{html.escape(hardware)}</code>.
Published figures come from Graphcore's ByteMLPerf C600 table and the Qwant C2 study; measured \
figures
come from the hardware named in each row. No IPU figure is ever estimated: where no IPU ran, the
scorecard says so. {html.escape(gpu_paths_statement())}</p>
{headline_chart(card)}
{scorecard_table(card, report_links(out, records, card))}
{peers_section(out)}
<h2>Reports</h2>
<div class='wide'><table><tr><th>Report</th><th>Status</th><th>Seconds</th><th>Where the seconds \
went</th><th>Peak memory</th><th>Hardware</th><th>Host</th><th>Results</th><th>Message</th></tr>
{"".join(rows)}</table></div>
<h2>Runs kept</h2><ul>{runs}</ul>
{comparisons(out)}
<script>{SCRIPT}</script>
</body></html>"""
    return atomic.write_text(out / "index.html", page)


def rebuild_index(out: Path | None = None) -> Path:
    """Index of the latest finished batch in state.json (every job's latest record if none), with
    the profile and hardware that batch ran with."""
    out = out or outputs_dir()
    run = latest_batch(out)
    return write_index(
        latest_records(out),
        out,
        profile=str(run.get("profile", "")) if run else "",
        hardware=str(run.get("hardware", "")) if run else "",
    )


def latest_batch(out: Path) -> dict | None:
    """The state's entry of the latest finished batch with jobs, a `kit rerun` not counted (it
    re-runs one result into a folder of its own), or None."""
    finished = [
        r
        for r in read_state(out)["runs"]
        if r.get("status", BatchRunStatus.COMPLETE) in FINISHED_RUNS
        and r["jobs"]
        and not is_rerun(r)
    ]
    return finished[-1] if finished else None


def latest_records(out: Path) -> list[dict]:
    """The records of the latest finished batch in state.json (every job's latest if none)."""
    state, run = read_state(out), latest_batch(out)
    names = run["jobs"] if run else list(state["jobs"])
    return [state["jobs"][n] for n in names if n in state["jobs"]]
