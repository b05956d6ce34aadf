"""What a batch of the same jobs took here before, read from outputs/state.json: the measured
figure beside `kit reproduce --plan`'s floors and guesses (nothing is run or written).

A batch run's entry in the state names its profile and hardware (kit.batch.runner, from this kit
on), its jobs, its start and end; the jobs it ran have a record in its folder
(runs/<id>/<job>.record), the ones it reused none.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from kit.batch.state import RECORD_SUFFIX, read_state
from kit.batch.status import BatchRunStatus, JobStatus
from kit.errors import KitError
from kit.paths import PLAIN_NAME, inside, plain_name


def last_measured(out: Path, profile: str, kind: str, jobs: set[str]) -> str:
    """The latest complete batch here of exactly `jobs` in `profile` on `kind` that ran at least
    one of them: how long it took from its start to its end and how many of its jobs it ran (the
    rest reused), or '' where there is none (or the state cannot be read: the plan never depends
    on it)."""
    try:
        runs = read_state(out)["runs"]
    except (KitError, OSError):
        return ""
    for run in reversed(runs):
        seconds = wall_seconds(run)
        if (
            seconds is None
            or run.get("status") != BatchRunStatus.COMPLETE
            or run.get("profile") != profile
            or kind not in str(run.get("hardware", "")).split(",")
            or {str(j) for j in run["jobs"]} != jobs
        ):
            continue
        ran = job_records(out, run["run_id"], jobs)
        if not ran:  # every job reused: it took seconds and says nothing of what a run takes
            continue
        failed = sum(r.get("status") != JobStatus.OK for r in ran)
        return (
            f"MEASURED here before: batch {run['run_id']} ({profile} on {run['hardware']}, "
            f"{run.get('started_at')}) took {seconds / 60:.1f} min from start to end, with "
            f"{len(ran)} of its {len(jobs)} jobs run ({failed} not ok) and {len(jobs) - len(ran)} "
            "reused; a run with more of them reused, or on warmer caches, takes less."
        )
    return ""


@dataclass(frozen=True)
class RunCounts:
    """How many of a run's jobs ran in its folder, and how many it reused from an earlier run."""

    ran: int
    reused: int


def ran_and_reused(out: Path, run: dict) -> RunCounts:
    """The run's jobs that ran there (a record, or from an older kit a result, in its folder) and
    the ones it reused (nothing of theirs in it)."""
    jobs = [str(j) for j in run["jobs"]]
    try:
        folder = out / "runs" / plain_name(run["run_id"], "run id")
    except KitError:
        return RunCounts(0, len(jobs))
    ran = sum(
        any((folder / f"{name}{suffix}").is_file() for suffix in (RECORD_SUFFIX, ".json"))
        for name in jobs
        if PLAIN_NAME.fullmatch(name)
    )
    return RunCounts(ran, len(jobs) - ran)


def wall_seconds(run: dict) -> float | None:
    """Seconds from a batch's start to its end, where both are recorded."""
    try:
        start = dt.datetime.fromisoformat(str(run["started_at"]))
        end = dt.datetime.fromisoformat(str(run["finished_at"]))
    except (KeyError, ValueError):
        return None
    return (end - start).total_seconds()


def job_records(out: Path, run_id: str, jobs: set[str]) -> list[dict]:
    """The records of the jobs a batch ran (a reused job has none in its folder)."""
    try:
        folder = out / "runs" / plain_name(run_id, "run id")
    except KitError:
        return []
    found = []
    for name in sorted(jobs):
        try:
            path = inside(folder, f"{plain_name(name, 'job name')}{RECORD_SUFFIX}")
            record = json.loads(path.read_text(encoding="utf-8"))
        except (KitError, OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append(record)
    return found
