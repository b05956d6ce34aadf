"""The scorecard read at a glance: a short reason for each row (the long one stays for the detail),
the reasons grouped per verdict with what a user can do about them, and one sentence per study.

Works on scorecard rows (kit.publish.compare.Comparison, read back from a DataFrame's records or
the summary job's JSON by `Comparison.of`), so the index and the summary notebook say the same
thing. Nothing here changes a figure or a verdict: only how they are said. A row is said and
grouped by its codes (ReasonCode, DifferenceCode) and where it was measured, never by its
sentence; a row an older kit wrote without them gets them first, in kit.publish.legacy_rows.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from kit.publish import legacy_rows
from kit.publish.compare import Comparison, DifferenceCode, ReasonCode
from kit.published.studies import PublishedStudy

# a scorecard row: a Comparison, or a record of one (DataFrame, summary JSON)
Row = Comparison | Mapping

#: The studies of the scorecard, in the order they are told: (study, how a sentence names it).
STUDIES = (
    (PublishedStudy.BYTEMLPERF_C600, "ByteMLPerf's C600 table (seed 001)"),
    (PublishedStudy.BYTEMLPERF_REPORTS, "The per-batch figures of ByteMLPerf's report JSONs"),
    (PublishedStudy.C2_QWANT, "Qwant's C2 study (tables 1-3)"),
    (PublishedStudy.BYTEMLPERF_C600_OLDER, "The older ByteMLPerf table (seed 000)"),
)
OTHER_STUDIES = "The seeds' training and price claims"

#: Verdicts in the order they are counted, as a sentence says them.
VERDICT_WORDS = (
    ("reproduced", "reproduced"),
    ("differs", "differ"),
    ("not comparable", "not comparable"),
    ("not measured", "not measured"),
    ("failed", "failed"),
)

#: A reason's code -> (the short reason, what a user can do: '' where nothing can be done here)
SHORT: dict[str, tuple[str, str]] = {
    ReasonCode.RANDOM_WEIGHTS: ("random weights", "real weights: kit fetch-weights MODEL"),
    ReasonCode.OWN_INPUTS: (
        "a numeric check on the kit's own inputs only",
        "real weights: kit fetch-weights MODEL",
    ),
    ReasonCode.NOT_SELECTED: ("not selected in this batch", "make reproduce without ONLY"),
    ReasonCode.NOT_RUN: ("not run", "make reproduce"),
    ReasonCode.NO_DATASET: ("no dataset", "kit fetch-data NAME, see docs/datasets.md"),
    ReasonCode.NO_ACCURACY_DATASET: ("no published accuracy dataset for this model", ""),
    ReasonCode.NO_REFERENCE: ("no fp32 reference session", ""),
    ReasonCode.CLAIM: ("a training or price claim, outside an inference kit", ""),
    ReasonCode.BATCH_NOT_RUN: ("the published batch size was not run", "make reproduce FORCE=1"),
    ReasonCode.BATCH_FAILED: ("the published batch size failed", "see the model report"),
    ReasonCode.BEFORE_TRIMMED: (
        "a result older than ByteMLPerf's trimmed latency",
        "make reproduce FORCE=1",
    ),
    ReasonCode.POWER_UNAVAILABLE: ("power unavailable", "a power sensor, see docs/power.md"),
    ReasonCode.TIMED_OUT: ("the job timed out", "see the batch index"),
    ReasonCode.UNREADABLE: ("an unreadable result file", "make reproduce FORCE=1"),
    ReasonCode.FAILED: ("the run failed", "see the model report"),
}

#: A difference from ByteMLPerf's way of running on the published part, by its code.
DIFFERENCE_WORDS: dict[str, str] = {
    DifferenceCode.BATCH: "another batch size",
    DifferenceCode.PADDED: "padded, published in pack mode",
    DifferenceCode.CLIENTS: "another number of clients",
    DifferenceCode.PRECISION: "another precision",
    DifferenceCode.POPRT: "another PopRT version",
    DifferenceCode.PASSES: "ByteMLPerf's passes not all applied",
}

TRADEMARKS = ("(R)", "(TM)", "(tm)")
CLASS_WORDS = {"cpu": "a CPU", "gpu": "a GPU", "ipu": "an IPU", "unknown": "unknown hardware"}


def missing(value) -> bool:
    """None or NaN (a pandas record's missing float)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def coded(row: Row) -> Comparison:
    """`row` as a Comparison with its codes (an older kit's row given them by
    kit.publish.legacy_rows)."""
    return legacy_rows.coded(Comparison.of(row))


def published_part(row: Row) -> str:
    """'Graphcore C600 (1 IPU, Mk2 ipu21)' -> 'C600'."""
    return (Comparison.of(row).published_hardware or "?").split(" (")[0].removeprefix("Graphcore ")


def measured_class(row: Row) -> str:
    """The measured hardware's class (cpu, gpu, ipu, unknown)."""
    return coded(row).measured_class or "unknown"


def emulated(row: Row) -> bool:
    return coded(row).emulated


def measured_device(row: Row) -> str:
    """'AMD EPYC (CPU)', or 'the PopRT test double' for an IPU path that did not run on an IPU."""
    row = coded(row)
    if row.emulated:
        return "the PopRT test double (not an IPU)"
    label = row.measured_name
    name = label.split(" (")[0]
    for mark in TRADEMARKS:  # trademarks and clocks off the name
        name = name.replace(mark, "")
    name = name.strip().split(" CPU @")[0].split(" @ ")[0]
    return f"{name} ({measured_class(row).upper()})" if name else CLASS_WORDS["unknown"]


def reason_code(row: Row) -> str:
    """The row's ReasonCode."""
    return coded(row).reason_code


def short_reason(row: Row) -> str:
    """The row's reason in a few words, the same for every row of its kind (it groups them)."""
    row = coded(row)
    verdict = str(row.verdict)
    if verdict in ("reproduced", "differs"):
        return "within tolerance" if verdict == "reproduced" else "outside tolerance"
    code = reason_code(row)
    if verdict == "not comparable":
        if code == ReasonCode.OTHER_HARDWARE:
            where = "the PopRT test double" if emulated(row) else CLASS_WORDS[measured_class(row)]
            return f"measured on {where}, not the {published_part(row)}"
        return f"on the {published_part(row)}, but " + ", ".join(differences(row))
    if code in SHORT:
        return SHORT[code][0]
    return first_clause(row.reason) or verdict


def differences(row: Row) -> list[str]:
    """The short names of the ways a figure was not measured as published, in the reason's order,
    by their codes (a code without a short name, such as a session's own reason, by its first
    clause)."""
    out = []
    row = coded(row)
    for code, text in zip(row.difference_codes, row.differences, strict=False):
        short = DIFFERENCE_WORDS.get(code) or first_clause(text)
        if short not in out:
            out.append(short)
    return out or ["measured another way"]


def first_clause(text: str, limit: int = 60) -> str:
    """The text up to its first ':', ';' or ' (', at most `limit` characters (how a sentence
    without a short name is said, never read)."""
    ends = [i for i in (text.find(":"), text.find(";"), text.find(" (")) if i >= 0]
    cut = text[: min(ends, default=len(text))].strip()
    return cut if len(cut) <= limit else cut[: limit - 1].rstrip() + "…"


def action(short: str) -> str:
    """What a user can do about a short reason ('' where nothing can be done here)."""
    return next((a for s, a in SHORT.values() if s == short), "")


def flags(row: Row) -> str:
    """' (noisy window)' / ' (indicative)' where the row's figure carries such a flag."""
    row = coded(row)
    return (" (noisy window)" if row.noisy else "") + (
        " (indicative power)" if row.indicative else ""
    )


def rows_of(card: Sequence[Row]) -> list[Comparison]:
    """The rows of a scorecard as Comparisons (records of a DataFrame or a summary JSON, or
    rows)."""
    return [coded(r) for r in card]


def grouped(card: Sequence[Row]) -> dict[str, list[tuple[str, int]]]:
    """Per verdict (every verdict, in order), its short reasons with how many rows each, most
    first."""
    counts = Counter((str(r.verdict), short_reason(r)) for r in rows_of(card))
    return {
        v: sorted(
            ((s, n) for (verdict, s), n in counts.items() if verdict == v), key=lambda sn: -sn[1]
        )
        for v, _ in VERDICT_WORDS
    }


def count_text(card: Sequence[Row]) -> str:
    """'0 reproduced, 0 differ, 15 not comparable, 109 not measured' (failed only where some
    did)."""
    counts = Counter(str(r.verdict) for r in rows_of(card))
    return ", ".join(
        f"{counts[v]} {word}" for v, word in VERDICT_WORDS if v != "failed" or counts[v]
    )


def study_sentence(title: str, given: Sequence[Row]) -> str:
    """One sentence: the study, where it was published, its counts and where it was measured
    here."""
    rows = rows_of(given)
    parts = sorted({(r.published_hardware or "?").split(" (")[0] for r in rows})
    devices = sorted({measured_device(r) for r in rows if not missing(r.measured)})
    where = f"measured here on {', '.join(devices)}" if devices else "none measured here"
    return (
        f"{title}: {len(rows)} figures published on {', '.join(parts)}: {count_text(rows)}; "
        f"{where}."
    )


def study_sentences(given: Sequence[Row]) -> list[str]:
    card, known = rows_of(given), {s for s, _ in STUDIES}
    out = [
        study_sentence(title, rows)
        for study, title in STUDIES
        if (rows := [r for r in card if r.study == study])
    ]
    others = [r for r in card if r.study not in known]
    return out + ([study_sentence(OTHER_STUDIES, others)] if others else [])


def reason_lines(card: Sequence[Row]) -> list[str]:
    """'42 not comparable: measured on a CPU, not the C600', one line per verdict with its reasons
    grouped and what to do ('12 random weights (real weights: kit fetch-weights MODEL)')."""
    lines = []
    words = dict(VERDICT_WORDS)
    for verdict, groups in grouped(card).items():
        total = sum(n for _, n in groups)
        if verdict == "failed" and not total:
            continue
        why = "; ".join(f"{n} {s}" + (f" ({action(s)})" if action(s) else "") for s, n in groups)
        lines.append(
            f"{total} {words[verdict]}"
            + (f": {why}" if why and verdict not in ("reproduced", "differs") else "")
        )
    return lines


def overview_html(given: Sequence[Row], full_table: str = "") -> str:
    """The top of a page: one sentence per study, then the counts with their reasons grouped."""
    if not given:
        return "<p class='glance'>No scorecard in this batch: the summary job did not run.</p>"
    card = rows_of(given)
    studies = "".join(f"<li>{_bold_count(s)}</li>" for s in study_sentences(card))
    reasons = "".join(f"<li>{_bold_count(line)}</li>" for line in reason_lines(card))
    link = f" (<a href='{html.escape(full_table)}'>the scorecard report</a>)" if full_table else ""
    return (
        f"<div class='glance'><h2>At a glance</h2><ul class='studies'>{studies}</ul>"
        f"<p>All {len(card)} published figures{link}:</p><ul class='reasons'>{reasons}</ul></div>"
    )


def _bold_count(line: str) -> str:
    head, sep, tail = line.partition(": ")
    return f"<b>{html.escape(head)}</b>{html.escape(sep + tail)}"
