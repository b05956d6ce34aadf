"""`ONLY=` and `FORCE=`: which jobs a batch runs, checked before anything runs."""

from __future__ import annotations

from kit.batch.jobs import Job
from kit.errors import InvalidParameter

FORCE_VALUES = ("0", "1")


def select(jobs: list[Job], only: str | None) -> list[Job]:
    """The jobs whose name contains one of the comma-separated words of `only` (None: all); a word
    that is a whole job name selects that job alone (`bert-torch-fp32_FP16` is not also albert's).

    An empty word, or a word that matches no job, is an error listing the job names.
    """
    if only is None:
        return list(jobs)
    names = ", ".join(j.name for j in jobs)
    words = [w.strip() for w in only.split(",")]
    if not all(words):
        raise InvalidParameter(
            "ONLY", only, f"comma-separated parts of job names, no empty word; jobs: {names}"
        )
    unmatched = [w for w in words if not any(w in j.name for j in jobs)]
    if unmatched:
        raise InvalidParameter(
            "ONLY", only, f"{', '.join(map(repr, unmatched))} matches no job; jobs: {names}"
        )
    exact = {j.name for j in jobs}
    return [j for j in jobs if any(w == j.name if w in exact else w in j.name for w in words)]


def parse_force(value: str | bool) -> bool:
    """FORCE=0 reuses unchanged notebooks, FORCE=1 re-runs every one; nothing else is allowed."""
    if isinstance(value, bool):
        return value
    if value.strip() not in FORCE_VALUES:
        raise InvalidParameter(
            "FORCE", value, "0 (reuse unchanged notebooks) or 1 (re-run every notebook)"
        )
    return value.strip() == "1"
