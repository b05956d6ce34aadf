"""Why a figure has no value, or was measured another way, as a code beside its sentence.

A code is made where the reason is: the accuracy check (`kit.datasets.accuracy`), the C2 study's
table (`kit.studies.c2`), the IPU session's description (`kit.backends.ipu.verdict`) and the
scorecard (`kit.publish.scorecard`). A run writes the code beside the sentence in its result JSON;
the scorecard carries both to its rows, and the glance (`kit.publish.glance`) says and groups rows
by the code, never by the sentence. Text an older kit wrote without a code is read once, in
`kit.results.schema` (results) and `kit.publish.legacy_rows` (scorecard rows).

>>> r = Reason("batch 4 not run (measured: 1)", ReasonCode.BATCH_NOT_RUN)
>>> str(r), r.code
('batch 4 not run (measured: 1)', <ReasonCode.BATCH_NOT_RUN: 'batch_not_run'>)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ReasonCode(StrEnum):
    """Why a scorecard row has its verdict; the value is what a result JSON and a row hold."""

    WITHIN_TOLERANCE = "within_tolerance"
    OUTSIDE_TOLERANCE = "outside_tolerance"
    OTHER_HARDWARE = "other_hardware"  # measured, not on the published part
    MEASURED_ANOTHER_WAY = "measured_another_way"  # on the published part, not the published way
    RANDOM_WEIGHTS = "random_weights"
    OWN_INPUTS = "own_inputs"
    NOT_SELECTED = "not_selected"
    NOT_RUN = "not_run"
    NO_DATASET = "no_dataset"
    NO_ACCURACY_DATASET = "no_accuracy_dataset"
    NO_REFERENCE = "no_reference"
    CLAIM = "claim"
    BATCH_NOT_RUN = "batch_not_run"
    BATCH_FAILED = "batch_failed"
    BEFORE_TRIMMED = "before_trimmed"
    POWER_UNAVAILABLE = "power_unavailable"
    TIMED_OUT = "timed_out"
    UNREADABLE = "unreadable"
    FAILED = "failed"
    OTHER = "other"  # said by the reason's first clause


class DifferenceCode(StrEnum):
    """One way a figure on the published part was not measured the published way
    (kit.publish.comparability, and the IPU session's own reasons)."""

    BATCH = "batch"
    PADDED = "padded"
    CLIENTS = "clients"
    PRECISION = "precision"
    POPRT = "poprt"
    PASSES = "passes"
    PLAN_PRECISION = "plan_precision"  # ByteMLPerf's settings run the model at another precision
    PASS_NOT_FIRED = "pass_not_fired"  # a pass ByteMLPerf applies did not fire on the kit's graph
    PASS_UNCHECKED = "pass_unchecked"  # a pass ByteMLPerf applies could not be checked
    PACKED_ATTENTION = "packed_attention"  # packed samples attend to each other
    SESSION = "session"  # another of the session's own reasons, said by its first clause


@dataclass(frozen=True)
class Reason:
    """A reason's sentence and its code; it prints as the sentence."""

    text: str
    code: ReasonCode | DifferenceCode = ReasonCode.OTHER

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return bool(self.text)


NO_REASON = Reason("")


def reason_code(value: object) -> ReasonCode:
    """The ReasonCode a file holds (OTHER where it holds none, or one this kit does not know)."""
    return ReasonCode._value2member_map_.get(str(value or ""), ReasonCode.OTHER)  # type: ignore[return-value]


def difference_code(value: object) -> DifferenceCode:
    """The DifferenceCode a file holds (SESSION where it holds none, or one this kit does not
    know)."""
    known = DifferenceCode._value2member_map_
    return known.get(str(value or ""), DifferenceCode.SESSION)  # type: ignore[return-value]
