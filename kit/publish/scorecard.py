"""Build the scorecard: the published tables' figures beside their measured twins, from results
JSON.

Reads only data/published and result JSON files, never a backend, so it runs anywhere.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.batch import JobRecord
from kit.batch.state import read_state
from kit.batch.status import JobStatus
from kit.errors import KitError
from kit.hardware.parts import MeasuredOn
from kit.measure.intervals import figure_interval
from kit.measure.stats import Interval
from kit.paths import outputs_dir
from kit.publish import glance
from kit.publish.comparability import PublishedRun, differences
from kit.publish.compare import (
    ACCURACY_METRICS,
    Comparison,
    Reason,
    ReasonCode,
    Verdict,
    tolerance_statement,
    verdict,
)
from kit.publish.imported_reports import figures as imported_figures
from kit.publish.imported_reports import with_columns
from kit.published import figures as published
from kit.published.studies import PublishedStudy
from kit.results import ResultKind, ResultStatus, RunResult
from kit.results.reasons import NO_REASON
from kit.results.tables import C2Row
from kit.results.windows import Measurement


@dataclass(frozen=True)
class RunOutcome:
    """What became of the job behind a row that has no usable result: failed (with the error),
    timed out, unreadable result (named), not selected, or not run."""

    verdict: Verdict
    reason: Reason


def read_results(paths: list[Path]) -> tuple[list[tuple[Path, RunResult]], dict[Path, str]]:
    """The readable results, and for every other path what is wrong with it (missing,
    unreadable)."""
    loaded, problems = [], {}
    for p in paths:
        try:
            loaded.append((p, RunResult.read(p)))
        except FileNotFoundError:
            problems[p] = "no result file"
        except (OSError, ValueError, KeyError, TypeError, KitError) as exc:
            problems[p] = f"unreadable result {p.name} ({type(exc).__name__}: {str(exc)[:120]})"
    return loaded, problems


def _batch_jobs() -> dict[str, JobRecord]:
    """The batch runner's record of each job (status, message), if a batch ran in outputs/; none
    where the state is missing or corrupt (the scorecard then says only what the results say)."""
    try:
        state = read_state(outputs_dir())
    except (KitError, OSError):
        return {}
    records = {}
    for name, data in state["jobs"].items():
        try:
            records[name] = JobRecord.from_dict(data)
        except (TypeError, ValueError, KitError):
            continue
    return records


def outcomes(
    paths: list[Path],
    results: list[tuple[Path, RunResult]],
    problems: dict[Path, str],
    jobs: dict[str, JobRecord] | None = None,
) -> dict[str, RunOutcome]:
    """Per job name (a result file's stem, e.g. resnet50-torch-fp32_FP16): why it has no usable
    result. A failed run says its error; a missing file takes the batch's record (failed, timed
    out)."""
    jobs = _batch_jobs() if jobs is None else jobs
    out: dict[str, RunOutcome] = {}
    for p, res in results:
        if res.status != ResultStatus.OK:
            out[p.stem] = RunOutcome(
                Verdict.FAILED,
                Reason(
                    "failed: " + ("; ".join(res.errors)[:300] or "status error"), ReasonCode.FAILED
                ),
            )
    for p, problem in problems.items():
        record = jobs.get(p.stem)
        message = record.message if record else ""
        if problem != "no result file":
            out[p.stem] = RunOutcome(Verdict.FAILED, Reason(problem, ReasonCode.UNREADABLE))
        elif record and record.status == JobStatus.TIMEOUT:
            out[p.stem] = RunOutcome(
                Verdict.FAILED,
                Reason(f"timed out: {message or 'job timeout'}", ReasonCode.TIMED_OUT),
            )
        else:
            why = message or "the job failed or timed out; see the batch index"
            out[p.stem] = RunOutcome(
                Verdict.FAILED,
                Reason(f"failed: no result file {p.name} ({why})", ReasonCode.FAILED),
            )
    return out


def measured_on(result: RunResult) -> MeasuredOn:
    """Where a result's figures were measured, from its backend block."""
    sections = result.sections
    return MeasuredOn.from_backend(
        sections.backend.raw if sections.backend else None, sections.environment.cpu.model or "?"
    )


def measured_hardware(result: RunResult, batch: int | str | None = None) -> str:
    """The device's name and class, the backend and precision that ran the figure at `batch` (each
    batch's own plan where each batch was searched), and '[not run on an IPU]' where due."""
    on, sections = measured_on(result), result.sections
    at = next((m for m in sections.measurements if str(m.measured_batch) == str(batch)), None)
    backend = sections.backend.at(at) if sections.backend else None
    what = f"; {backend.name} {backend.precision}" if backend else ""
    if backend and backend.compiled:
        what += " compiled"
    if sections.tables.search_decision:
        what += ", chosen by search"
    tail = " [not run on an IPU]" if on.emulated else ""
    return f"{on.name} ({on.hardware_class}{what}){tail}"


def _latest_ok(
    results: list[tuple[Path, RunResult]], kind: str, **match
) -> tuple[Path, RunResult] | None:
    hits = [
        (p, r)
        for p, r in results
        if r.kind == kind
        and r.status == ResultStatus.OK
        and all(r.parameters.get(k) == v for k, v in match.items())
    ]
    return max(hits, key=lambda pr: pr[1].created_at) if hits else None


@dataclass(frozen=True, kw_only=True)
class PublishedFigure:
    """A published figure a scorecard row judges: the row (its `study` column, figure, model,
    precision, batch, unit), the value, the study it was published in (its hardware and part) and
    where in it (`source`)."""

    study: str
    figure: str
    model: str
    precision: str
    batch: int | str | None
    unit: str
    value: float | None
    published_study: str
    source: str


@dataclass(frozen=True, kw_only=True)
class MeasuredFigure:
    """The measured twin of a published figure: its value from `result` (read from `path`), why
    there is none (`reason`; `outcome`: what became of a job with no usable result), how it was
    not measured the published way (`differences`, kit.publish.comparability), the figure over
    every call beside ByteMLPerf's (`all_calls`), the batch it comes from where not the published
    one (`measured_at`), and `indicative` ('indicative only: ...') for a power figure whose window
    its sensor does not resolve."""

    value: float | None
    result: RunResult | None
    path: Path | None
    reason: Reason
    outcome: RunOutcome | None = None
    differences: tuple[Reason, ...] = ()
    all_calls: float | None = None
    indicative: str = ""
    measured_at: int | None = None


def _row(pub: PublishedFigure, meas: MeasuredFigure) -> Comparison:
    """One scorecard row: the published figure beside its measured twin, judged; the indicative
    flag goes into the row's reason and its own column."""
    res, value, outcome = meas.result, meas.value, meas.outcome
    on = measured_on(res) if res else None
    reason = outcome.reason if res is None and outcome is not None else meas.reason
    indicative = meas.indicative if value is not None else ""
    interval, noisy = figure_interval(res, pub.figure, meas.measured_at or pub.batch, value)
    part = published.study_part(pub.published_study)
    v, why, ratio = verdict(
        pub.figure,
        pub.value,
        value,
        part,
        on,
        reason.text,
        interval=interval,
        noisy="; ".join(x for x in (noisy, indicative) if x),
        differences=[d.text for d in meas.differences],
    )
    if res is None and outcome is not None:
        v = outcome.verdict
    code = row_code(v, reason, on, part)
    ways = meas.differences if code == ReasonCode.MEASURED_ANOTHER_WAY else ()
    return Comparison(
        study=pub.study,
        figure=pub.figure,
        model=pub.model,
        precision=pub.precision,
        batch_size=str(pub.batch or ""),
        unit=pub.unit,
        published=pub.value,
        published_hardware=published.study_hardware(pub.published_study),
        measured=value,
        measured_hardware=measured_hardware(res, meas.measured_at or pub.batch) if res else "",
        verdict=v,
        reason=str(why),
        ratio=ratio,
        source=pub.source,
        run=meas.path.name if meas.path else "",
        run_path=result_key(meas.path) if meas.path else "",
        measured_low=interval.low if interval else None,
        measured_high=interval.high if interval else None,
        noisy=noisy,
        measured_all_calls=meas.all_calls,
        indicative=indicative,
        measured_batch=str(meas.measured_at or (pub.batch if value is not None else "") or ""),
        reason_code=str(code),
        differences=tuple(d.text for d in ways),
        difference_codes=tuple(str(d.code) for d in ways),
        measured_name=on.name if on else "",
        measured_class=on.hardware_class if on else "",
        emulated=bool(on and on.emulated),
    )


def row_code(v: Verdict, reason: Reason, on: MeasuredOn | None, part: str | None) -> ReasonCode:
    """Why a row has its verdict: from the verdict and where it was measured, else the code its
    missing reason was made with."""
    if v in (Verdict.REPRODUCED, Verdict.DIFFERS):
        return (
            ReasonCode.WITHIN_TOLERANCE if v == Verdict.REPRODUCED else ReasonCode.OUTSIDE_TOLERANCE
        )
    if v == Verdict.NOT_COMPARABLE:
        same = on is not None and on.same_part(part)
        return ReasonCode.MEASURED_ANOTHER_WAY if same else ReasonCode.OTHER_HARDWARE
    return ReasonCode(reason.code)


NOT_SELECTED = RunOutcome(
    Verdict.NOT_MEASURED,
    Reason(
        "not selected: no job for this row in this batch (left out by the profile or by ONLY)",
        ReasonCode.NOT_SELECTED,
    ),
)
NOT_RUN = RunOutcome(
    Verdict.NOT_MEASURED,
    Reason("not run: no result for this row under outputs/runs/", ReasonCode.NOT_RUN),
)


def row_outcome(
    model: str, precision: str, states: dict[str, RunOutcome] | None, selected: set[str] | None
) -> RunOutcome:
    """Why the row (model, published precision) has no usable result. A batch over several kinds
    of hardware names its jobs `<job>@<kind>`: the first such state found stands for the row."""
    job = f"{model}_{precision}"
    names = [n for n in (states or {}) if n == job or n.startswith(f"{job}@")]
    if states and names:
        return states[names[0]]
    if selected is not None and not any(n == job or n.startswith(f"{job}@") for n in selected):
        return NOT_SELECTED
    return NOT_RUN


#: where each ByteMLPerf seed table's headline rows come from, as a row's source says it
SEED_SOURCES = {
    PublishedStudy.BYTEMLPERF_C600: "seed 001 README table",
    PublishedStudy.BYTEMLPERF_C600_OLDER: "seed 000 older table",
}


def bytemlperf_rows(
    results,
    states: dict[str, RunOutcome] | None = None,
    selected: set[str] | None = None,
    pub_study: PublishedStudy = PublishedStudy.BYTEMLPERF_C600,
) -> list[Comparison]:
    """The headline rows (QPS + metric) of a seed table and, for seed 001, the per-batch report
    figures. `states` and `selected` say what became of rows without a usable result."""
    rows = []
    src = SEED_SOURCES[PublishedStudy.parse(pub_study)]
    for _, r in published.headline_rows(pub_study).iterrows():
        hit = _latest_ok(
            results, ResultKind.MODEL_BENCHMARK, model=r.model, published_precision=r.precision
        )
        path, res = hit if hit else (None, None)
        outcome = None if res else row_outcome(r.model, r.precision, states, selected)
        batch = published.headline_batch(r.model, r.precision, r.qps)
        qps, reason, m = headline_qps(res, batch)
        rows.append(
            _row(
                PublishedFigure(
                    study=pub_study,
                    figure="QPS",
                    model=r.model,
                    precision=r.precision,
                    batch=batch,
                    unit="samples/s",
                    value=r.qps,
                    published_study=pub_study,
                    source=src,
                ),
                MeasuredFigure(
                    value=qps,
                    result=res,
                    path=path,
                    reason=reason,
                    outcome=outcome,
                    differences=differences_of(res, m, r.model, r.precision, batch),
                    measured_at=m.measured_batch if m else None,
                ),
            )
        )
        value, reason = metric_value(res, r.metric)
        rows.append(
            _row(
                PublishedFigure(
                    study=pub_study,
                    figure=r.metric,
                    model=r.model,
                    precision=r.precision,
                    batch="",
                    unit=r.metric_unit,
                    value=r.metric_value,
                    published_study=pub_study,
                    source=src,
                ),
                MeasuredFigure(value=value, result=res, path=path, reason=reason, outcome=outcome),
            )
        )
        if pub_study == PublishedStudy.BYTEMLPERF_C600:
            rows += per_batch_rows(r.model, r.precision, res, path, pub_study, outcome)
    return rows


#: The per-batch figures of ByteMLPerf's reports: the scorecard's name, ByteMLPerf's figure, the
#: same figure over every call (shown beside), and the unit.
PER_BATCH = {
    "Performance/QPS": ("QPS", "samples/s"),
    "Performance/AVG Latency": ("AVG Latency", "ms"),
    "Performance/P99 Latency": ("P99 Latency", "ms"),
}
BYTEMLPERF_VALUE = {
    "QPS": ("qps", "throughput"),
    "AVG Latency": ("avg_latency_ms", "mean_ms"),
    "P99 Latency": ("p99_latency_ms", "p99_ms"),
}


def per_batch_rows(
    model, precision, res, path, pub_study, outcome: RunOutcome | None = None
) -> list[Comparison]:
    rep = published.reports()
    perf = rep[(rep["model"] == model) & (rep["precision"] == precision) & rep["batch"].notna()]
    rows = []
    for _, f in perf.iterrows():
        name, unit = PER_BATCH[f["metric"]]
        batch = int(f["batch"])
        value, reason, m = figure_at_batch(res, batch, name)
        rows.append(
            _row(
                PublishedFigure(
                    study=PublishedStudy.BYTEMLPERF_REPORTS,
                    figure=name,
                    model=model,
                    precision=precision,
                    batch=batch,
                    unit=unit,
                    value=f["number"],
                    published_study=pub_study,
                    source="ByteMLPerf report JSON",
                ),
                MeasuredFigure(
                    value=value,
                    result=res,
                    path=path,
                    reason=reason,
                    outcome=outcome,
                    differences=differences_of(res, m, model, precision, batch),
                    all_calls=all_calls(m, name),
                ),
            )
        )
    return rows


def headline_qps(
    res: RunResult | None, batch: int | None
) -> tuple[float | None, Reason, Measurement | None]:
    """The headline QPS at its published batch; where that batch was not run, the best QPS measured
    at another one (its batch then makes the verdict "not comparable", with the ratio shown)."""
    qps, reason, m = figure_at_batch(res, batch, "QPS")
    measurements = res.sections.measurements if res is not None else ()
    if m is None and measurements and reason.code != ReasonCode.BATCH_FAILED:
        m = max(measurements, key=lambda x: x.qps_bytemlperf or 0)
        return m.qps_bytemlperf, NO_REASON, m
    return qps, reason, m


def figure_at_batch(
    res: RunResult | None, batch: int | None, figure: str
) -> tuple[float | None, Reason, Measurement | None]:
    """(ByteMLPerf's `figure` at `batch`, why there is none, the measurement) of a result."""
    if res is None:
        return None, NO_REASON, None
    m = next((m for m in res.sections.measurements if m.measured_batch == batch), None)
    if m is None:
        failed = res.sections.tables.failed(batch) if batch is not None else None
        return (
            None,
            (
                Reason(f"batch {batch} failed: {failed.strip()}", ReasonCode.BATCH_FAILED)
                if failed is not None
                else Reason(
                    f"batch {batch} not run (measured: {batches_text(res)})",
                    ReasonCode.BATCH_NOT_RUN,
                )
            ),
            None,
        )
    if figure == "QPS":
        return m.qps_bytemlperf, NO_REASON, m
    value = m.bytemlperf.figure(BYTEMLPERF_VALUE[figure][0])
    before = Reason(
        "measured before ByteMLPerf's trimmed latency was kept", ReasonCode.BEFORE_TRIMMED
    )
    return value, NO_REASON if value is not None else before, m


def batches_text(res: RunResult) -> str:
    return ", ".join(str(m.measured_batch) for m in res.sections.measurements) or "no batch"


def all_calls(m: Measurement | None, figure: str) -> float | None:
    """The figure over every timed call (ByteMLPerf's trims its calls), shown beside it."""
    if m is None:
        return None
    key = BYTEMLPERF_VALUE[figure][1]
    return m.throughput if key == "throughput" else getattr(m.latency, key)


def differences_of(
    res: RunResult | None, m: Measurement | None, model: str, precision: str, batch: int | None
) -> tuple[Reason, ...]:
    if res is None:
        return ()
    return tuple(differences(res, m, PublishedRun.of(model, precision, batch)))


RANDOM_DIFF = Reason(
    "random weights: a Mean Diff from random weights says how far this backend's arithmetic "
    "drifts from the fp32 CPU run on untrained activations, whose scale and spread differ from "
    "the trained model's, so it is not compared with the published diff",
    ReasonCode.RANDOM_WEIGHTS,
)
OWN_INPUTS = Reason(
    "only a numeric check on the kit's own random inputs, not ByteMLPerf's fake_dataset run "
    "with real weights; not counted",
    ReasonCode.OWN_INPUTS,
)
RANDOM_WEIGHTS = Reason("random weights", ReasonCode.RANDOM_WEIGHTS)
NO_DATASET = Reason("no dataset", ReasonCode.NO_DATASET)


def metric_value(res: RunResult | None, metric: str) -> tuple[float | None, Reason]:
    """The measured accuracy or Mean Diff, or why there is none. Both count only when measured
    with real weights on the published dataset (status "measured")."""
    if res is None:
        return None, NO_REASON
    if metric in ACCURACY_METRICS or metric == "Mean Diff":
        sections = res.sections
        checks = [a for a in sections.accuracy if a.metric == metric]
        if measured := next((a for a in checks if a.measured), None):
            return measured.value, NO_REASON
        if sections.model and sections.model.random_weights:
            return None, RANDOM_DIFF if metric == "Mean Diff" else RANDOM_WEIGHTS
        if checks:
            return None, checks[0].reason
        return None, OWN_INPUTS if metric == "Mean Diff" and res.numerics else NO_DATASET
    return None, Reason("not computed")


def c2_rows(
    results, state: RunOutcome | None = None, selected: set[str] | None = None
) -> list[Comparison]:
    hit = _latest_ok(results, ResultKind.C2_STUDY)
    path, res = hit if hit else (None, None)
    outcome = (
        None
        if res
        else (
            state
            or (
                NOT_SELECTED
                if selected is not None and ResultKind.C2_STUDY not in selected
                else RunOutcome(
                    Verdict.NOT_MEASURED, Reason("C2 study not run", ReasonCode.NOT_RUN)
                )
            )
        )
    )
    table = {row.batch_size: row for row in (res.sections.tables.c2 if res else ())}
    pub_study = PublishedStudy.C2_QWANT
    rows = []
    for batch, pub in published.c2_tables().iterrows():
        m = table.get(int(batch)) or C2Row(batch_size=int(batch))
        for figure, key, unit in (
            ("Latency", "latency_ms", "ms/batch"),
            ("Throughput", "throughput", "images/s"),
            ("Energy efficiency", "efficiency", "images/s/W"),
        ):
            rows.append(
                _row(
                    PublishedFigure(
                        study=PublishedStudy.C2_QWANT,
                        figure=figure,
                        model="resnext101-c2",
                        precision="FP16 (mixed)",
                        batch=batch,
                        unit=unit,
                        value=float(pub[figure]),
                        published_study=pub_study,
                        source=C2_SOURCES.get(figure, "seed 003 tables 1-3"),
                    ),
                    MeasuredFigure(
                        value=m.figure(key),
                        result=res,
                        path=path,
                        reason=m.reason_of(key),
                        outcome=outcome,
                        indicative=m.indicative_for(key),
                    ),
                )
            )
    return rows


#: Where a C2 figure comes from, with how throughput is defined: batch / mean latency (the
#: paper's, and the study's measured figure; each window's wall-clock rate, a few % below it, is
#: in the study report's windows table)
C2_SOURCES = {
    "Throughput": "seed 003 tables 1-3 (throughput = batch / mean latency, the paper's definition; "
    "measured the same way)"
}


def claim_rows() -> list[Comparison]:
    f = published.figures()
    claims = f[f["table"] == "claims"]
    return [
        Comparison(
            study=r.study,
            figure=r.metric,
            model=r.model,
            precision="",
            batch_size="",
            unit=r.unit,
            published=r.number,
            published_hardware=r.hardware,
            measured=None,
            measured_hardware="",
            verdict=Verdict.NOT_MEASURED,
            reason="training / price claim, outside an inference kit",
            ratio=None,
            source=r.source,
            reason_code=str(ReasonCode.CLAIM),
        )
        for r in claims.itertuples()
    ]


def build(result_paths: list[Path], selected: bool | None = None) -> pd.DataFrame:
    """The scorecard of `result_paths`. `selected` (default: when paths are given) makes rows
    without a job in the paths "not selected" rather than "not run"."""
    paths = list(result_paths)
    results, problems = read_results(paths)
    states = outcomes(paths, results, problems)
    chosen = {p.stem for p in paths} if selected or (selected is None and paths) else None
    rows = (
        bytemlperf_rows(results, states, chosen)
        + bytemlperf_rows(results, states, chosen, PublishedStudy.BYTEMLPERF_C600_OLDER)
        + c2_rows(results, states.get(ResultKind.C2_STUDY), chosen)
        + claim_rows()
    )
    # reports imported by `kit import-bytemlperf`: further published columns, never a verdict
    return with_columns(pd.DataFrame([r.to_dict() for r in rows]), imported_figures())


def summary_counts(card: pd.DataFrame) -> dict[str, int]:
    """How many figures got each verdict (every verdict listed, zeros included)."""
    counts = card["verdict"].map(str).value_counts()
    return {str(v): int(counts.get(str(v), 0)) for v in Verdict}


def result_key(path: Path) -> str:
    """How a scorecard row names the result file it read (`Comparison.run_path`) and a page's
    links find its report: relative to outputs/, absolute where it lies outside.

    >>> result_key(outputs_dir() / "runs" / "r1" / "job.json")
    'runs/r1/job.json'
    """
    out, path = outputs_dir().resolve(), Path(path).resolve()
    return path.relative_to(out).as_posix() if path.is_relative_to(out) else path.as_posix()


def result_paths(files: list[str]) -> list[Path]:
    """The given result files (relative to outputs/), or every JSON under outputs/runs/."""
    out = outputs_dir()
    if files:
        return [out / f if not Path(f).is_absolute() else Path(f) for f in files]
    return sorted((out / "runs").glob("*/*.json"))


def interpretation(card: pd.DataFrame) -> str:
    counts = summary_counts(card)
    reproduced = counts.get("reproduced", 0)
    return (
        f"<p>{len(card)} published figures (the ByteMLPerf tables of seeds 001 and 000, the "
        "per-batch figures of its report JSONs, the C2 study's tables 1-3 and the seeds' training "
        "and price claims; the C600 spec sheet and the C2 setup facts are listed in the "
        f"published_results notebook, not scored): {reproduced} reproduced, "
        f"{counts.get('not comparable', 0)} measured on other hardware (not comparable; the ratio "
        f"is shown), {counts.get('failed', 0)} failed (the run failed, timed out or left an "
        f"unreadable result; the error is given), {counts.get('not measured', 0)} not measured "
        "(the reason is given per row). "
        "A figure counts as reproduced only when it was measured on the same part as published "
        "(a real C600 for the ByteMLPerf rows, a Mk1 C2 card for the C2 study; never a test "
        "double) and within the stated tolerance.</p>"
    )


DISPLAY_COLUMNS = [
    "figure",
    "model",
    "precision",
    "batch_size",
    "published",
    "unit",
    "published_hardware",
    "measured",
    "measured_hardware",
    "ratio",
    "verdict",
    "reason",
]


def display_table(card: pd.DataFrame) -> pd.DataFrame:
    """The scorecard for reading: numbers to 4 significant digits, the measured figure as
    value with its 95 % interval (`measured_text`), and "—" with the reason where there is no
    value."""
    imported = [c for c in card.columns if c.endswith((" published", " source"))]
    out = card[DISPLAY_COLUMNS + imported].copy()
    out["published"] = out["published"].map(lambda v: readable(v, 6) or "— (no published figure)")
    rows = [Comparison.from_dict(r) for r in card.to_dict("records")]
    out["measured"] = [measured_text(r) for r in rows]
    out["ratio"] = [
        readable(r.ratio, 3)
        or f"— ({'not measured' if r.measured is None else 'no published figure'})"
        for r in rows
    ]
    return out.reset_index(drop=True)


def measured_text(row: Comparison | dict) -> str:
    """'1,234 ± 25' (an interval symmetric about the value to the two digits shown),
    '19.91 [19.34, 19.91]' (one that is not: `Interval.shown`), '1,234' (no interval), or
    '— (<reason>)'; ' (indicative)' after a power figure its sensor did not resolve."""
    row = Comparison.of(row)
    value = row.measured
    if value is None:
        return f"— ({row.reason or 'not measured'})"
    tail = " (indicative)" if row.indicative else ""
    interval = Interval(value, row.measured_low, row.measured_high)
    return interval.shown(lambda x: readable(x, 4), half_width_text) + tail


def half_width_text(half: float) -> str:
    """Two significant digits, never in exponent form: 370, 3.7, 0.012."""
    if half <= 0 or not math.isfinite(half):
        return "0"
    return f"{half:,.{max(0, 1 - math.floor(math.log10(half)))}f}"


def readable(value, digits: int) -> str:
    """13,499 / 1,474.16 / 0.76963: thousands separated, small numbers to `digits` significant;
    '' for no value (callers say why)."""
    if value is None or pd.isna(value):
        return ""
    if abs(value) >= 1000:
        return f"{value:,.2f}".rstrip("0").rstrip(".") if digits > 4 else f"{value:,.0f}"
    return f"{value:.{digits}g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.2e}"


def header(card: pd.DataFrame) -> str:
    """The top of the scorecard report, as HTML: one sentence per study, the counts with their
    reasons grouped, the tolerances and what counts as reproduced."""
    rule = (
        "A figure counts as reproduced only when it was measured on the same part as published (a "
        "real C600 for the ByteMLPerf rows, a Mk1 C2 card for the C2 study; never a test double), "
        "the published way (batch size, clients, precision, passes, pack mode, PopRT version) and "
        "within the stated tolerance. The C600 spec sheet and the C2 setup facts are listed in the "
        "published_results notebook, not scored."
    )
    return (
        glance.overview_html(card.to_dict("records"))
        + f"<p>{html.escape(tolerance_statement())}</p><p>{html.escape(rule)}</p>"
    )
