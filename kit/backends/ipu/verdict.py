"""How an IPU session's description says it departs from ByteMLPerf's recipe: each reason under
`not_comparable`, the key the scorecard reads (kit.publish.comparability.session_differences), and
as a "not comparable: ..." note for the reader."""

from __future__ import annotations

NOT_COMPARABLE = "not comparable: "


def mark_not_comparable(description: dict, reason: str) -> None:
    """Record `reason` (with or without the "not comparable: " prefix) as one the row is not comparable."""
    reason = reason.removeprefix(NOT_COMPARABLE)
    description["comparable"] = False
    description.setdefault("not_comparable", []).append(reason)
    description.setdefault("notes", []).append(NOT_COMPARABLE + reason)
