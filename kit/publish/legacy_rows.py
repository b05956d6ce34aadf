"""A scorecard row an older kit wrote (a summary JSON or a scorecard file from before rows carried
codes): its reason code, its differences and where it was measured, read from its sentences. The
only place a row's sentence is read (the patterns are kit.results.legacy's); a row this kit writes
carries them (kit.publish.scorecard), and kit.publish.glance reads only those.

>>> row = coded(Comparison(study="c2_qwant", figure="Latency", model="m", precision="", batch_size="",
...     unit="ms", published=1.0, published_hardware="", measured=None, measured_hardware="",
...     verdict=Verdict.FAILED, reason="timed out: after 600 s"))
>>> row.reason_code
'timed_out'
"""  # noqa: E501

from __future__ import annotations

import re
from dataclasses import replace

from kit.publish.compare import Comparison, Verdict
from kit.results.legacy import code_from_text, difference_from_text
from kit.results.reasons import ReasonCode

#: Where an older row's measured_hardware says the device's class, and that it was not an IPU.
CLASS_IN_LABEL = r"\((cpu|gpu|ipu|unknown)[;)]"
EMULATED_IN_LABEL = "[not run on an IPU"


def coded(row: Comparison) -> Comparison:
    """`row` with the codes and the place of measurement an older kit did not write (a row that
    has its reason code is returned as it is)."""
    if row.reason_code:
        return row
    code = _reason_code(row)
    ways = _differences(row.reason) if code == ReasonCode.MEASURED_ANOTHER_WAY else []
    found = re.search(CLASS_IN_LABEL, row.measured_hardware)
    return replace(
        row,
        reason_code=str(code),
        differences=tuple(ways),
        difference_codes=tuple(str(difference_from_text(w)) for w in ways),
        measured_name=row.measured_name or row.measured_hardware.split(" (")[0],
        measured_class=found.group(1) if found else "",
        emulated=EMULATED_IN_LABEL in row.measured_hardware,
    )


def _reason_code(row: Comparison) -> ReasonCode:
    if row.verdict in (Verdict.REPRODUCED, Verdict.DIFFERS):
        return (
            ReasonCode.WITHIN_TOLERANCE
            if row.verdict == Verdict.REPRODUCED
            else ReasonCode.OUTSIDE_TOLERANCE
        )
    if row.verdict == Verdict.NOT_COMPARABLE:
        return (
            ReasonCode.OTHER_HARDWARE
            if row.reason.startswith("measured on ")
            else ReasonCode.MEASURED_ANOTHER_WAY
        )
    return code_from_text(row.reason)


def _differences(reason: str) -> list[str]:
    """The clauses before the ratio (and a noisy window's reasons) of a row measured another way."""
    clauses: list[str] = []
    for clause in reason.split("; "):
        if clause.startswith("ratio ") or clause.startswith("noisy"):
            break
        clauses.append(clause)
    return clauses
