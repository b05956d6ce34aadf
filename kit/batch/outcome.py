"""What one notebook execution came to: the executor's Outcome and the results JSON's verdict."""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from kit.batch.status import JobStatus
from kit.results import ResultStatus


@dataclass
class Outcome:
    """How an executor's run of one notebook ended (before its results JSON is read)."""

    status: JobStatus  # OK: the process finished cleanly (its result not read yet)
    message: str
    seconds: float
    _: KW_ONLY
    host: str = ""
    worker: str = ""
    attempts: int = 1
    note: str = ""

    def __post_init__(self) -> None:
        self.status = JobStatus.parse(self.status)


def result_status(results: Path) -> tuple[JobStatus, str, str]:
    """(status, message, hardware) from the notebook's results JSON."""
    if not results.exists():
        return JobStatus.FAILED, "notebook wrote no results JSON", ""
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return JobStatus.FAILED, f"results JSON {results.name} is not JSON: {exc}", ""
    errors = data.get("errors") or []
    ok = data.get("status") == ResultStatus.OK and not errors
    status = JobStatus.OK if ok else JobStatus.ERROR
    return status, "; ".join(errors)[:300], hardware_label(data)


def hardware_label(data: dict) -> str:
    """'<device> (<kind>, <cores>): <backend> <precision>', or '' for runs that time nothing."""
    backend = data.get("backend") or {}
    if not backend:
        return ""
    info = backend.get("device_info") or {}
    cores = info.get("cores")
    label = (
        f"{info.get('name', '?')} ({info.get('kind', '?')}{f', {cores} cores' if cores else ''}): "
        f"{backend.get('name')} {backend.get('precision')}"
    )
    if (backend.get("session") or {}).get("emulated"):
        label += " [IPU path emulated: not run on an IPU]"
    return label
