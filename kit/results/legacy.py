"""Text an older kit wrote without a code, read as one: the only place a reason's sentence is read.

A result of schema version 1 or 2 holds an accuracy check's status, a C2 table's reason and an IPU
session's reasons as sentences only (`kit.results.schema.update_to_3` codes them here, once, when
the file is read); a scorecard row an older kit wrote holds its reason as a sentence only
(`kit.publish.legacy_rows`); a torch.compile that fell back to eager was said only in a session note
(`kit.results.schema.update_to_4` reads it here); a server study's skipped C2 prediction was said
only in a note (`update_to_5`). Today's kit writes each code where the reason is
made (kit.results.reasons): nothing new is parsed.

>>> code_from_text("batch 4 not run (measured: 1)"), code_from_text("a sentence")
(<ReasonCode.BATCH_NOT_RUN: 'batch_not_run'>, <ReasonCode.OTHER: 'other'>)
"""

from __future__ import annotations

import re

from kit.results.reasons import DifferenceCode, ReasonCode

#: A reason's start -> its code, as an older kit worded each.
TEXT_CODES = (
    (r"random weights", ReasonCode.RANDOM_WEIGHTS),
    (r"only a numeric check on the kit's own", ReasonCode.OWN_INPUTS),
    (r"not selected", ReasonCode.NOT_SELECTED),
    (r"not run|C2 study not run", ReasonCode.NOT_RUN),
    (r"no dataset", ReasonCode.NO_DATASET),
    (r"no published accuracy dataset", ReasonCode.NO_ACCURACY_DATASET),
    (r"no reference session", ReasonCode.NO_REFERENCE),
    (r"training / price claim", ReasonCode.CLAIM),
    (r"batch \d+ not run", ReasonCode.BATCH_NOT_RUN),
    (r"batch \d+ failed", ReasonCode.BATCH_FAILED),
    (r"measured before ByteMLPerf's trimmed", ReasonCode.BEFORE_TRIMMED),
    (r"power unavailable", ReasonCode.POWER_UNAVAILABLE),
    (r"timed out", ReasonCode.TIMED_OUT),
    (r"unreadable result", ReasonCode.UNREADABLE),
    (r"failed", ReasonCode.FAILED),
)

#: A difference's start -> its code, as an older kit worded each (kit.publish.comparability).
DIFFERENCES = (
    (r"batch \d+, published at batch", DifferenceCode.BATCH),
    (r"padded batches, published in pack mode", DifferenceCode.PADDED),
    (r"\d+ client\(s\), published with", DifferenceCode.CLIENTS),
    (r"precision \S+, published", DifferenceCode.PRECISION),
    (r"PopRT \S+, published with PopRT", DifferenceCode.POPRT),
    (r"ByteMLPerf's .* not applied", DifferenceCode.PASSES),
)


def code_from_text(text: str) -> ReasonCode:
    """The code of a reason an older kit wrote as a sentence only; OTHER where none fits."""
    return next((code for pattern, code in TEXT_CODES if re.match(pattern, text)), ReasonCode.OTHER)


def difference_from_text(clause: str) -> DifferenceCode:
    """The code of a difference an older kit wrote as a sentence only; SESSION where none fits."""
    return next(
        (code for pattern, code in DIFFERENCES if re.match(pattern, clause)), DifferenceCode.SESSION
    )


def failed_batches(errors: object) -> list[dict[str, object]]:
    """An older model benchmark's failed batches, from its errors ("batch 4: <error>")."""
    said = errors if isinstance(errors, list) else []
    found = (re.match(r"batch (\d+):(.*)", str(e), re.DOTALL) for e in said)
    return [{"batch_size": int(m.group(1)), "error": m.group(2).strip()} for m in found if m]


def accuracy_code(status: object) -> str | None:
    """An older accuracy check's code, from its status (None where it was measured)."""
    if status == "measured":
        return None
    return str(code_from_text(str(status or "no status recorded").removeprefix("not measured: ")))


def compile_fallback(notes: object) -> str | None:
    """Why an older torch session's compile fell back to eager, from its note ("torch.compile failed
    (<why>); fell back to eager"); None where no note says so.

    >>> compile_fallback(["torch.compile failed (recompile limit); fell back to eager"])
    'recompile limit'
    """
    said = [str(n) for n in notes] if isinstance(notes, list | tuple) else []
    note = next((n for n in said if "fell back to eager" in n), None)
    found = re.match(r"torch\.compile failed \((.*)\); fell back to eager", note or "", re.DOTALL)
    return found.group(1) if found else note


def c2_prediction_skipped(notes: object) -> str | None:
    """Why an older server study skipped its C2 prediction, from its note ("C2 prediction skipped:
    <why>"); None where no note says so.

    >>> c2_prediction_skipped(["C2 prediction skipped: no published C2 latencies"])
    'no published C2 latencies'
    """
    said = [str(n) for n in notes] if isinstance(notes, list | tuple) else []
    prefix = "C2 prediction skipped:"
    return next((n.removeprefix(prefix).strip() for n in said if n.startswith(prefix)), None)
