"""Two runs' figures side by side (`kit compare RUN_A RUN_B`, kit.cli.compare), with intervals,
the ratio, whether the difference is significant (Mann-Whitney U over rounds, Holm-corrected over
the figures), and the environment differences.

A run is a result folder (outputs/runs/<run_id>/, or one copied from another machine) or a single
result JSON. Reads only result JSON files. Writes an HTML page under outputs/compare/.

A figure's interval says how precisely its own run measured it. Between two runs a machine also
drifts (other tenants of a cloud host, memory placement, clocks) on time scales longer than one
timed window, which no within-run interval can see. The comparison estimates that drift from all
the shared throughput figures (`between_run_noise`, a method-of-moments estimate on the log ratios,
robust to outliers) and reports the share of differences inside the within-run intervals alone and
inside the intervals widened by the drift.

Each row's verdict and the summary come from the same three facts, so they cannot disagree: the
Holm-adjusted p-value (one test per figure: QPS shares the throughput's rounds, so it is not
tested again), and whether the difference lies inside the intervals widened by the drift. A
difference is reported only when both say so; one that is significant within the runs but inside
the drift is reported as such. With few rounds (5 a side, a dozen figures) the rank test cannot
reach alpha after Holm's adjustment whatever the effect: the absence of significance then says
nothing, so the verdict comes from the intervals ("intervals apart") or is "cannot tell", with the
smallest difference the intervals could show. A change common to every figure (a uniform 5 %
speed-up) looks like drift between two runs: when every tested figure moved the same way, the rows
that show a difference read "moved with every figure" (where the drift was estimated, only those
inside it: one beyond it stands out of the common change), whether or not the drift could be
estimated, and the summary says so.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from kit import atomic
from kit.errors import InvalidParameter, KitError, MissingResource
from kit.measure.intervals import round_groups
from kit.measure.stats import Interval
from kit.paths import output_file, outputs_dir
from kit.results import (
    CorruptResult,
    ResultKind,
    RunResult,
    UnreadableResult,
    UnsupportedVersion,
)
from kit.results.sections import Environment, KitSource
from kit.results.windows import Measurement

ALPHA = 0.05
Z95 = 1.959964
CHI2_1_MEDIAN = 0.454936  # median of a chi-square with one degree of freedom
# one figure per measured window: the others are not independent of it
DRIFT_FIGURES = ("throughput",)
# figure -> (interval key in a measurement, unit, higher is better)
FIGURES = {
    "QPS": ("qps_bytemlperf", "samples/s", True),
    "throughput": ("throughput", "samples/s", True),
    "mean latency": ("mean_ms", "ms", False),
    "p99 latency": ("p99_ms", "ms", False),
}
# figure -> the figure whose per-round series it reuses (tested once)
SAME_ROUNDS = {"QPS": "throughput"}
# verdicts: what a row's finding says, and what the summary counts
DIFFERS, IN_DRIFT, SAME, UNTESTED = "differs", "inside drift", "no difference", "not tested"
APART, CANNOT_TELL, COMMON = "intervals apart", "cannot tell", "moved with every figure"
VERDICTS = (DIFFERS, APART, IN_DRIFT, COMMON, SAME, CANNOT_TELL)


@dataclass(kw_only=True)
class Figure:
    """One figure of one run: value, interval, per-round values (for the test) and its window's
    noise."""

    value: float
    interval: Interval | None
    rounds: list[float]
    unit: str
    higher_is_better: bool
    noisy: str = ""

    @property
    def finite_rounds(self) -> list[float]:
        return [v for v in self.rounds if math.isfinite(v)]


@dataclass(kw_only=True)
class Row:
    key: str
    a: Figure
    b: Figure
    ratio: float | None = None
    p_value: float | None = None  # two-sided Mann-Whitney U over rounds
    # the same, Holm-adjusted over every tested figure of the comparison
    p_holm: float | None = None
    # the smallest Holm-adjusted p these rounds could give at any effect
    p_floor: float | None = None
    verdict: str = UNTESTED
    finding: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def within_intervals(self) -> bool | None:
        """Is B/A inside the 95 % interval of the ratio: each side's relative half-width combined on
        the log scale (about |B - A| <= sqrt(hw_A^2 + hw_B^2) for small differences)? None when
        either side has no interval."""
        return self.within(0.0)

    def log_ratio_and_variance(self) -> tuple[float, float] | None:
        """ln(B/A) and its within-run variance (each side's relative half-width / 1.96, squared)."""
        ha = self.a.interval.half_width if self.a.interval else None  # None: no interval
        hb = self.b.interval.half_width if self.b.interval else None
        if ha is None or hb is None or not (self.a.value > 0 and self.b.value > 0):
            return None
        va = (ha / Z95 / self.a.value) ** 2
        vb = (hb / Z95 / self.b.value) ** 2
        return math.log(self.b.value / self.a.value), va + vb

    def within(self, drift_sd: float) -> bool | None:
        """Is ln(B/A) inside 1.96 x sqrt(within-run variance + drift_sd^2)? None without
        intervals."""
        lv = self.log_ratio_and_variance()
        if lv is None:
            return None
        r, v = lv
        return abs(r) <= Z95 * math.sqrt(v + drift_sd**2)


def load_run(path: Path, unsupported: list[str] | None = None) -> list[tuple[Path, RunResult]]:
    """Every readable result JSON of a run folder (or the one file given); each result this kit
    cannot read (another schema version, a file cut short) is named in `unsupported` where a list
    is given."""
    path = Path(path)
    if not path.exists():
        raise MissingResource(
            f"run {path} does not exist (give a result folder such as outputs/runs/<run_id>/ "
            "or a result .json)"
        )
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    out = []
    unsupported = [] if unsupported is None else unsupported
    for f in files:
        try:
            out.append((f, RunResult.read(f)))
        except (UnsupportedVersion, UnreadableResult, CorruptResult) as exc:
            unsupported.append(str(exc))
        except (OSError, ValueError, KeyError, TypeError, KitError) as exc:
            if not path.is_dir():  # the one file given: say why it is no result
                unsupported.append(f"{f}: {exc}" if str(f) not in str(exc) else str(exc))
            continue  # not a result file (a LoadGen log, a summary of another tool...)
    if not any(r.measurements for _, r in out):
        if unsupported:
            raise KitError(
                f"run {path} has no result this kit can read: {'; '.join(unsupported[:3])}"
                f"{f' (and {len(unsupported) - 3} more)' if len(unsupported) > 3 else ''}"
            )
        raise InvalidParameter(
            "run", str(path), "a folder or file with result JSON holding measurements"
        )
    return out


def figures_of(results: list[tuple[Path, RunResult]]) -> dict[str, Figure]:
    """'<study/model> [<precision>] batch <b>: <figure>' -> Figure, for every timed measurement."""
    out: dict[str, Figure] = {}
    for _, r in sorted(results, key=lambda pr: pr[1].created_at):
        # the latest result of a name wins
        label = r.name if r.kind != ResultKind.C2_STUDY else ResultKind.C2_STUDY.value
        precision = r.parameters.get("published_precision") or r.parameters.get("precision") or ""
        for m in r.sections.measurements:
            batch = m.batch_size * (m.threads if m.mode == "replicas" else 1)
            per_round = _round_series(m)
            noisy = "noisy: " + "; ".join(m.noise.reasons) if m.noise and m.noise.noisy else ""
            for figure, (key, unit, higher) in FIGURES.items():
                value = m.figure(key)
                if value is None or not math.isfinite(value):
                    continue
                iv = Interval.from_dict(m.interval(key))
                out[f"{label} [{precision}] batch {batch}: {figure}"] = Figure(
                    value=value,
                    interval=iv,
                    rounds=per_round[key],
                    unit=unit,
                    higher_is_better=higher,
                    noisy=noisy,
                )
    return out


def _round_series(m: Measurement) -> dict[str, list[float]]:
    """Per round: throughput (samples/s), mean and p99 latency (ms); QPS uses the throughput's."""
    calls = m.call_times()
    if not calls or not any(calls):
        return {k: [] for k in ("qps_bytemlperf", "throughput", "mean_ms", "p99_ms")}
    groups, _ = round_groups(calls, m.round_ends)
    thr, mean, p99 = [], [], []
    for g in groups:
        rate = sum(len(t) / ((t[-1][1] - t[0][0]) / 1e9) for t in g if t and t[-1][1] > t[0][0])
        lat = np.array([(e - s) / 1e6 for t in g for s, e in t])
        thr.append(rate * m.batch_size)
        mean.append(float(lat.mean()) if lat.size else math.nan)
        p99.append(float(np.percentile(lat, 99)) if lat.size else math.nan)
    return {"qps_bytemlperf": thr, "throughput": thr, "mean_ms": mean, "p99_ms": p99}


def compare_figures(a: dict[str, Figure], b: dict[str, Figure], alpha: float = ALPHA) -> list[Row]:
    """A row per shared figure; one test per figure, Holm-corrected; each row's verdict."""
    rows = []
    for key in [k for k in a if k in b]:
        fa, fb = a[key], b[key]
        row = Row(key=key, a=fa, b=fb, ratio=fb.value / fa.value if fa.value else None)
        xa, xb = fa.finite_rounds, fb.finite_rounds
        twin = SAME_ROUNDS.get(key.rsplit(": ", 1)[-1])
        if twin:
            row.finding = f"not tested again: its rounds are the {twin}'s (see that row)"
        elif len(xa) >= 2 and len(xb) >= 2:
            row.p_value = float(stats.mannwhitneyu(xb, xa, alternative="two-sided").pvalue)
        else:
            row.finding = f"not tested (rounds: {len(xa)} in A, {len(xb)} in B; needs 2 each)"
        row.notes = [f"{side}: {f.noisy}" for side, f in (("A", fa), ("B", fb)) if f.noisy]
        rows.append(row)
    tested = [r for r in rows if r.p_value is not None]
    for row, adjusted in zip(
        tested, holm([r.p_value for r in tested if r.p_value is not None]), strict=True
    ):
        row.p_holm = adjusted
    _set_p_floors(tested)
    drift = between_run_noise(rows)
    for row in tested:
        row.verdict, row.finding = judge(row, alpha, drift)
    _mark_common_change(rows, drift)
    return rows


def moved_together(rows: list[Row]) -> bool | None:
    """True (all better) or False (all worse) when every tested figure moved the same way, at least
    3 of them; None otherwise (an unchanged figure, as a copied result, breaks it)."""
    tested = [r for r in rows if r.p_value is not None]
    if len(tested) < 3 or any(r.b.value == r.a.value for r in tested):
        return None
    better = {(r.b.value > r.a.value) == r.a.higher_is_better for r in tested}
    return better.pop() if len(better) == 1 else None


def _mark_common_change(rows: list[Row], drift: float | None) -> None:
    """With every figure moved the same way, a row that shows a difference moved with every other
    figure, which two runs cannot attribute: it reads so, never 'inside the drift' nor 'differs'.
    Where the drift was estimated, from these two runs, it holds that common change itself: the
    rows inside it are relabelled (a 7x slow-down would read 'inside the drift'), and a row that
    differs beyond it stands out of the common change and keeps its verdict. Where it was not
    (fewer than 3 throughput figures), nothing measures the common change: every row that shows a
    difference is relabelled (a same-commit rerun read 'B higher, better' on every figure). A row
    that shows none keeps its verdict."""
    if moved_together(rows) is None:
        return
    speed = float(np.median(_throughput_ratios(rows) or [math.nan]))
    relabelled = (IN_DRIFT,) if drift is not None else (IN_DRIFT, DIFFERS, APART)
    for row in rows:
        if row.verdict in relabelled:
            row.verdict, row.finding = COMMON, _common_finding(row, speed)


def _throughput_ratios(rows: list[Row]) -> list[float]:
    return [r.ratio for r in rows if r.key.endswith(DRIFT_FIGURES) and r.ratio]


def _common_finding(row: Row, speed: float) -> str:
    """Why a row moved with every figure, with its own test's p-value."""
    return (
        f"{_direction(row)}, as every tested figure is (median throughput B/A {speed:.3g}): a "
        "change of the whole run (machine, load or software) that two runs cannot tell from "
        f"run-to-run drift; repeat each run (Holm-adjusted p = {row.p_holm:.2g})"
    )


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error rate), in the input's order."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided Mann-Whitney p-value n_a and n_b rounds can give, by the same method
    scipy picks for them (2 / C(n_a + n_b, n_a) where exact): complete separation of the samples.

    >>> round(smallest_p(5, 5), 4)
    0.0079
    """
    return float(
        stats.mannwhitneyu(np.arange(n_b) + n_a, np.arange(n_a), alternative="two-sided").pvalue
    )


def _set_p_floors(tested: list[Row]) -> None:
    """Each row's lowest reachable Holm-adjusted p: Holm multiplies the smallest p by the number of
    tests and never lowers a later one, so no row goes under (family's smallest p) x m."""
    if not tested:
        return
    own = [smallest_p(len(r.a.finite_rounds), len(r.b.finite_rounds)) for r in tested]
    family = min(own) * len(tested)
    for row, p in zip(tested, own, strict=True):
        row.p_floor = min(1.0, max(family, p))


def judge(row: Row, alpha: float, drift: float | None) -> tuple[str, str]:
    """(verdict, finding). Different when significant after Holm and outside the drift; when the
    rank test is not significant, what the intervals can say: apart, or the smallest difference
    they could show. "No significant difference" only where the test could have found one."""
    assert row.p_holm is not None, "judged after Holm's adjustment"
    p = f"Holm-adjusted p = {row.p_holm:.2g}"
    apart = row.within(drift or 0.0) is False
    if row.p_holm < alpha:
        if drift is not None and row.within(drift):
            return IN_DRIFT, f"differs within the runs ({p}) but inside the run-to-run drift"
        return DIFFERS, f"{_direction(row)} ({p})"
    rounds = f"{len(row.a.finite_rounds)} rounds in A, {len(row.b.finite_rounds)} in B"
    blind = row.p_floor is not None and row.p_floor >= alpha
    test = (
        f"too few rounds for the rank test ({rounds}: its smallest possible Holm-adjusted p is "
        f"{row.p_floor:.2g}, alpha {alpha})"
        if blind
        else p
    )
    if apart:
        return APART, f"{_direction(row)}: {_apart_words(row, drift)}; {test}"
    if drift is not None and row.within(0.0) is False:
        return IN_DRIFT, f"outside the runs' intervals but inside the run-to-run drift; {test}"
    detectable = _detectable(row, drift)
    if blind:
        return (
            CANNOT_TELL,
            f"cannot tell ({rounds}; the smallest difference this could detect is {detectable})",
        )
    return (
        SAME,
        f"no significant difference ({p}; the smallest difference these rounds could detect is "
        f"{detectable})",
    )


def _direction(row: Row) -> str:
    higher = row.b.value > row.a.value
    better = higher == row.a.higher_is_better
    return f"B {'higher' if higher else 'lower'}, {'better' if better else 'worse'}"


def _apart_words(row: Row, drift: float | None) -> str:
    """What the intervals say: the ratio's 95 % interval excludes 1, and whether the two figures'
    own intervals are apart too (they can overlap while the ratio's excludes 1)."""
    ia, ib = row.a.interval, row.b.interval
    a_lo, a_hi = (ia.low, ia.high) if ia else (None, None)
    b_lo, b_hi = (ib.low, ib.high) if ib else (None, None)
    apart = (
        a_lo is not None
        and a_hi is not None
        and b_lo is not None
        and b_hi is not None
        and (a_hi < b_lo or b_hi < a_lo)
    )
    own = (
        "the two figures' 95 % intervals do not overlap either"
        if apart
        else "although the two figures' own 95 % intervals overlap"
    )
    return f"the 95 % interval of B/A excludes 1{_ratio_interval(row, drift)}, {own}"


def _ratio_interval(row: Row, drift: float | None) -> str:
    lv = row.log_ratio_and_variance()
    if lv is None:
        return ""
    r, v = lv
    half = Z95 * math.sqrt(v + (drift or 0.0) ** 2)
    return (
        f" (B/A {math.exp(r):.3g}, 95 % interval {math.exp(r - half):.3g}-{math.exp(r + half):.3g})"
    )


def _detectable(row: Row, drift: float | None) -> str:
    """The smallest change the intervals (widened by the drift) would show: 1.96 x the ratio's
    sd."""
    lv = row.log_ratio_and_variance()
    if lv is None:
        return "unknown: a figure has no interval"
    return f"{100 * (math.exp(Z95 * math.sqrt(lv[1] + (drift or 0.0) ** 2)) - 1):.0f} %"


ENV_KEYS = ("host", "os", "python", "gpus", "ipu_present")


def environment_differences(
    a: list[tuple[Path, RunResult]], b: list[tuple[Path, RunResult]]
) -> list[tuple[str, str, str]]:
    """(what, in A, in B) for every environment or backend setting that differs."""
    ea, eb = _first(a).sections.environment, _first(b).sections.environment
    diffs = [
        (key, str(ea.fact(key)), str(eb.fact(key)))
        for key in ENV_KEYS
        if ea.fact(key) != eb.fact(key)
    ]
    diffs += [
        (f"cpu {key}", str(x), str(y))
        for key, x, y in (
            ("model", ea.cpu.model, eb.cpu.model),
            ("cores", ea.cpu.cores, eb.cpu.cores),
        )
        if x != y
    ]
    if _kit(ea) != _kit(eb):
        diffs.append(("kit", _kit(ea), _kit(eb)))
    both = bool(ea.distributions) and bool(eb.distributions)  # older results lack them
    for group in ("packages", "threads") + (("distributions",) if both else ()):
        ga, gb = getattr(ea, group), getattr(eb, group)
        for key in sorted(set(ga) | set(gb)):  # distribution names: data, not the schema's keys
            if ga.get(key) != gb.get(key) and not (group == "distributions" and key in ea.packages):
                diffs.append((f"{group}: {key}", str(ga.get(key, "—")), str(gb.get(key, "—"))))
    sa, sb = _sessions(a), _sessions(b)
    for name in sorted(set(sa) & set(sb)):
        for key in sorted(set(sa[name]) | set(sb[name])):
            if sa[name].get(key) != sb[name].get(key):
                diffs.append(
                    (
                        f"{name} session: {key}",
                        str(sa[name].get(key, "—")),
                        str(sb[name].get(key, "—")),
                    )
                )
    na, nb = _noisy_share(a), _noisy_share(b)
    if na != nb:
        diffs.append(("windows marked noisy", na, nb))
    return diffs


def _kit(env: Environment) -> str:
    """The kit a result ran: commit and whether the tree had local changes (with their hash)."""
    kit = env.kit or KitSource()
    if not kit.commit:
        return f"version {kit.version}" if kit.version else "not recorded"
    return kit.commit[:12] + (f" + local changes {str(kit.diff_sha256)[:12]}" if kit.dirty else "")


def _first(results):
    return next(r for _, r in results if r.measurements)


def _sessions(results) -> dict[str, dict]:
    return {r.name: r.sections.session.scalars() for _, r in results if r.sections.backend}


def _noisy_share(results) -> str:
    noises = [m.noise for _, r in results for m in r.sections.measurements if m.noise]
    return f"{sum(n.noisy for n in noises)} of {len(noises)}" if noises else "not sampled"


def _value(f: Figure) -> str:
    return (
        f.interval.text() if f.interval and f.interval.available else f"{f.value:.4g} (no interval)"
    )


def text_report(rows: list[Row], diffs, name_a: str, name_b: str) -> str:
    lines = [
        f"A = {name_a}",
        f"B = {name_b}",
        "",
        f"{'figure':<58} {'A (95 % CI)':>22} {'B (95 % CI)':>22} {'B/A':>7}  finding",
    ]
    for r in rows:
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "—"
        note = f"  [{'; '.join(r.notes)}]" if r.notes else ""
        lines.append(
            f"{r.key:<58} {_value(r.a):>22} {_value(r.b):>22} {ratio:>7}  {r.finding}{note}"
        )
    lines += ["", summary_line(rows), "", "Environment differences:"]
    lines += [f"  {what}: {x} -> {y}" for what, x, y in diffs] or ["  none recorded"]
    return "\n".join(lines)


def between_run_noise(rows: list[Row]) -> float | None:
    """The run-to-run drift's standard deviation on the log scale (0.05 ~ 5 %), beyond what the
    within-run intervals explain: median(ln(B/A)^2) / median(chi2_1) - median(within variance),
    over the throughput figures (robust: a few real changes do not inflate it). None under 3
    figures."""
    pairs = [
        p
        for r in rows
        if r.key.endswith(DRIFT_FIGURES) and (p := r.log_ratio_and_variance()) is not None
    ]
    if len(pairs) < 3:
        return None
    total = float(np.median([r * r for r, _ in pairs])) / CHI2_1_MEDIAN
    return math.sqrt(max(0.0, total - float(np.median([v for _, v in pairs]))))


def _share(flags: list[bool | None]) -> str:
    judged = [f for f in flags if f is not None]
    return f"{sum(judged)} of {len(judged)} ({sum(judged) / len(judged):.0%})" if judged else "none"


def summary_line(rows: list[Row]) -> str:
    """Counts of the rows' own verdicts, the drift they were judged against, and the shares of
    differences inside the intervals (one per figure: QPS rows repeat the throughput's)."""
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    tested = sum(counts.values())
    figures = [r for r in rows if not _twin(r)]
    line = (
        f"{len(rows)} shared figures, {tested} tested (Mann-Whitney U over rounds, two-sided, "
        f"Holm-adjusted over the {tested}, alpha {ALPHA}): {counts[DIFFERS]} differ, "
        f"{counts[APART]} differ by their intervals where the rank test had too few rounds or no "
        f"significance, {counts[IN_DRIFT]} differ within the runs but inside the run-to-run drift, "
        f"{counts[COMMON]} moved with every other figure (a change of the whole run), "
        f"{counts[SAME]} show no significant difference, {counts[CANNOT_TELL]} cannot tell (too "
        "few rounds for the rank test and intervals that overlap); run-to-run difference inside "
        "the 95 % interval of the difference (sqrt(hw_A^2 + hw_B^2)): "
        f"{_share([r.within_intervals for r in figures])}"
    )
    drift = between_run_noise(rows)
    return line + _drift_words(figures, drift) + _common_change(rows, drift)


def _drift_words(figures: list[Row], drift: float | None) -> str:
    """The run-to-run drift and the share of differences inside the intervals it widens."""
    if drift is None:
        return "; run-to-run drift: not estimated (needs 3 throughput figures with intervals)"
    return (
        f"; run-to-run drift beyond the within-run intervals, estimated from the throughput "
        f"figures: ±{100 * (math.exp(Z95 * drift) - 1):.0f} % (95 %, sd {drift:.3f} on the log "
        f"scale); inside the intervals widened by it: {_share([r.within(drift) for r in figures])}"
    )


def _twin(row: Row) -> bool:
    return row.key.rsplit(": ", 1)[-1] in SAME_ROUNDS


def _common_change(rows: list[Row], drift: float | None) -> str:
    """A note when every tested figure moved the same way (all better, or all worse), drift
    estimated or not."""
    better = moved_together(rows)
    speed = _throughput_ratios(rows)
    if better is None or not speed:
        return ""
    held = ", so the drift estimate holds it too" if drift is not None else ""
    return (
        f"; every tested figure is {'better' if better else 'worse'} in B (median throughput B/A "
        f"{float(np.median(speed)):.3f}): with two runs a change common to all figures cannot be "
        f"told from run-to-run drift{held}; repeat each run to tell them apart"
    )


def html_report(rows: list[Row], diffs, name_a: str, name_b: str) -> str:
    esc = html.escape
    body = "".join(
        f"<tr><td>{esc(r.key)}</td><td>{esc(_value(r.a))}</td><td>{esc(_value(r.b))}</td>"
        f"<td>{'—' if r.ratio is None else f'{r.ratio:.3f}'}</td>"
        f"<td>{'—' if r.p_value is None else f'{r.p_value:.2g}'}</td>"
        f"<td>{'—' if r.p_holm is None else f'{r.p_holm:.2g}'}</td><td>{esc(r.finding)}</td>"
        f"<td>{esc('; '.join(r.notes))}</td></tr>"
        for r in rows
    )
    env = (
        "".join(
            f"<tr><td>{esc(w)}</td><td>{esc(x)}</td><td>{esc(y)}</td></tr>" for w, x, y in diffs
        )
        or "<tr><td colspan=3>none recorded</td></tr>"
    )
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>kit compare</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:3px \
7px;text-align:left}}th{{background:#f0f0f0}}</style></head><body>
<h1>Run comparison</h1><p>A = <code>{esc(name_a)}</code><br>B = <code>{esc(name_b)}</code></p>
<p>Each value is shown with its 95 % confidence interval (from rounds of calls); B/A is the ratio;
the p-value is a two-sided Mann-Whitney U test over the rounds of both runs \
(scipy.stats.mannwhitneyu:
exact for small samples without ties, else the normal approximation), one per figure (QPS shares the
throughput's rounds); Holm's adjustment over all tested figures; a difference is reported when the
adjusted p is below {ALPHA} and the difference lies outside the intervals widened by the \
run-to-run drift,
or when those intervals do not overlap although the rank test cannot say so (with few rounds it \
cannot
reach {ALPHA} after Holm's adjustment at any effect). "No significant difference" is said only \
where the
test could have found one; otherwise "cannot tell", with the smallest difference the intervals \
could show.</p>
<table><tr><th>Figure</th><th>A</th><th>B</th><th>B/A</th><th>p</th><th>Holm \
p</th><th>Finding</th><th>Noise</th></tr>
{body}</table><p>{esc(summary_line(rows))}</p><h2>Environment differences that could explain a \
difference</h2>
<table><tr><th>What</th><th>A</th><th>B</th></tr>{env}</table></body></html>"""


def compare_runs(run_a: Path, run_b: Path, out: Path | None = None) -> tuple[str, Path]:
    """(text report, path of the HTML page) comparing two runs."""
    name = f"{_slug(run_a)}__vs__{_slug(run_b)}.html"
    page = output_file(out or outputs_dir() / "compare" / name, name)
    skipped: list[str] = []
    a, b = load_run(run_a, skipped), load_run(run_b, skipped)
    rows = compare_figures(figures_of(a), figures_of(b))
    diffs = environment_differences(a, b)
    name_a, name_b = str(run_a), str(run_b)
    left_out = "".join(f"\nleft out, this kit cannot read it: {s}" for s in skipped)
    atomic.write_text(
        page,
        html_report(rows, diffs, name_a, name_b).replace(
            "</body>",
            "".join(f"<p>Left out, this kit cannot read it: {html.escape(s)}</p>" for s in skipped)
            + "</body>",
        ),
    )
    return text_report(rows, diffs, name_a, name_b) + left_out, page


def _slug(path: Path) -> str:
    p = Path(path).resolve()
    return (p.name if p.is_dir() else f"{p.parent.name}-{p.stem}") or "run"
