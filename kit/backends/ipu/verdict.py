"""How an IPU session's description says it departs from ByteMLPerf's recipe: each reason under
`not_comparable` with its code (a kit.results.reasons.DifferenceCode) at the same place under
`not_comparable_codes`, the keys the scorecard reads
(kit.publish.comparability.session_differences), and as a "not comparable: ..." note for the
reader."""

from __future__ import annotations

from kit.results.reasons import DifferenceCode

NOT_COMPARABLE = "not comparable: "


def mark_not_comparable(description: dict, reason: str, code: DifferenceCode) -> None:
    """Record `reason` (with or without the "not comparable: " prefix) and its code as one the row
    is not comparable.

    >>> d = {}
    >>> mark_not_comparable(d, "not comparable: packed samples attend", DifferenceCode.PACKED_ATTENTION)
    >>> d["not_comparable"], d["not_comparable_codes"]
    (['packed samples attend'], ['packed_attention'])
    """  # noqa: E501
    reason = reason.removeprefix(NOT_COMPARABLE)
    description["comparable"] = False
    description.setdefault("not_comparable", []).append(reason)
    description.setdefault("not_comparable_codes", []).append(str(code))
    description.setdefault("notes", []).append(NOT_COMPARABLE + reason)
