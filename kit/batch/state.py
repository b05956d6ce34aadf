"""outputs/state.json: the latest record of every job and the list of runs.

The state is read and checked before anything else is created; a file that cannot be parsed or
lacks what the batch needs is a clear error naming it. `rebuild_state` rebuilds it from the
per-job records (and, for older runs, the result JSON files) under outputs/runs/, moving the
corrupt file aside. Every save is atomic.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from kit import atomic
from kit.batch.jobs import STATUSES, JobRecord
from kit.batch.outcome import result_status
from kit.batch.status import BatchRunStatus
from kit.errors import KitError
from kit.paths import PLAIN_NAME, PLAIN_RULE, inside, plain_name

STATE_FILE = "state.json"
# Beside each run's results, not named *.json: readers of results take every JSON in a run folder.
RECORD_SUFFIX = ".record"  # runs/<id>/<job>.record: the job's JobRecord (JSON)
RUN_FILE = "batch.run"  # runs/<id>/batch.run: the run's entry in the state (JSON)
# A run's entry made by `kit rerun` names the result it re-ran: its jobs' records stay in its folder
# and never replace the state's, and it is never the index's latest batch.
RERUN_OF = "rerun_of"
_REQUIRED_RECORD_KEYS = ("name", "notebook", "status", "run_id", "fingerprint", "html", "results")


class CorruptState(KitError):
    """outputs/state.json exists but is not a valid batch state."""

    def __init__(self, path: Path, problem: str):
        self.path, self.problem = path, problem
        super().__init__(
            f"{path} is not a valid batch state ({problem}). Rebuild it from the results under "
            f"{path.parent / 'runs'} with `kit rebuild-state` (or `make rebuild-state`); the "
            f"corrupt file is moved aside, not deleted."
        )


def empty_state() -> dict:
    return {"jobs": {}, "runs": []}


def state_problem(data: object) -> str | None:
    """What makes `data` unusable as a state, or None when it is valid."""
    if not isinstance(data, dict):
        return f"top level is {type(data).__name__}, expected an object"
    for key, kind in (("jobs", dict), ("runs", list)):
        if key not in data:
            return f"missing key {key!r}"
        if not isinstance(data[key], kind):
            return f"{key!r} is {type(data[key]).__name__}, expected {kind.__name__}"
    for name, record in data["jobs"].items():
        if not PLAIN_NAME.fullmatch(name):
            return f"job name {name!r} is not {PLAIN_RULE}"
        if not isinstance(record, dict):
            return f"job {name!r} is not an object"
        missing = [k for k in _REQUIRED_RECORD_KEYS if k not in record]
        if missing:
            return f"job {name!r} lacks {', '.join(missing)}"
        if record["status"] not in STATUSES:
            return f"job {name!r} has unknown status {record['status']!r}"
        if outside := [k for k in ("html", "results") if not _under_runs(record[k])]:
            return f"job {name!r} has {outside[0]} {record[outside[0]]!r}, not a file under runs/"
    for i, run in enumerate(data["runs"]):
        if (
            not isinstance(run, dict)
            or not isinstance(run.get("run_id"), str)
            or not isinstance(run.get("jobs"), list)
        ):
            return f"run #{i} lacks run_id or jobs"
    return None


def _under_runs(relative: object) -> bool:
    """Whether a record's path is runs/<run id>/<file>, relative to outputs/."""
    parts = relative.split("/") if isinstance(relative, str) else []
    return (
        len(parts) == 3 and parts[0] == "runs" and all(PLAIN_NAME.fullmatch(p) for p in parts[1:])
    )


def read_state(out: Path) -> dict:
    """The state in `out`, an empty state when there is none; CorruptState when it is unusable."""
    path = out / STATE_FILE
    if not path.exists():
        return empty_state()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptState(path, f"not JSON: {exc}") from None
    problem = state_problem(data)
    if problem:
        raise CorruptState(path, problem)
    return data


def save_state(out: Path, state: dict) -> None:
    atomic.write_text(out / STATE_FILE, json.dumps(state, indent=1))


def save_record(out: Path, record: JobRecord) -> None:
    """The record beside its results (runs/<id>/<job>.record), so the state can be rebuilt from
    outputs/runs/; the job's name is applied once, inside its run's folder."""
    path = inside(
        out / "runs" / plain_name(record.run_id, "run id"),
        f"{plain_name(record.name, 'job name')}{RECORD_SUFFIX}",
    )
    atomic.write_text(path, json.dumps(record.to_dict(), indent=1))


def rebuild_state(out: Path) -> tuple[dict, Path | None]:
    """Rebuild state.json from outputs/runs/; returns (state, where the old file was moved)."""
    path = out / STATE_FILE
    moved = None
    if path.exists():
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        moved = path.with_name(f"{STATE_FILE}.corrupt-{stamp}-{os.getpid()}")
        path.replace(moved)
    state = empty_state()
    runs = out / "runs"
    for run_dir in sorted(runs.iterdir(), key=_run_order) if runs.is_dir() else []:
        if run := _rebuilt_run(run_dir, out, state):
            state["runs"].append(run)
    save_state(out, state)
    return state, moved


def _rebuilt_run(run_dir: Path, out: Path, state: dict) -> dict | None:
    """The state's entry of one run folder, its records put into `state` (those of a `kit rerun`
    not: they never replace a batch's); None for a folder without a job."""
    records = sorted(_records_of(run_dir, out), key=lambda r: r.get("finished_at", ""))
    if not records:
        return None
    saved = _saved_run(run_dir / RUN_FILE)
    rerun_of = str(saved.get(RERUN_OF) or "") if saved else ""
    for record in records:
        record.pop("finished_at", None)
        if not rerun_of:
            state["jobs"][record["name"]] = record
    finished = dt.datetime.fromtimestamp(max(p.stat().st_mtime for p in run_dir.iterdir()))
    run = {
        "run_id": run_dir.name,
        "jobs": [r["name"] for r in records],
        "finished_at": finished.isoformat(timespec="seconds"),
        "status": BatchRunStatus.REBUILT,
        **({RERUN_OF: rerun_of} if rerun_of else {}),
    }
    # a complete batch's list includes the jobs it reused
    if saved and saved.get("status") == BatchRunStatus.COMPLETE and not rerun_of:
        run["jobs"] = [n for n in saved["jobs"] if n in state["jobs"]]
    return run


def is_rerun(run: dict) -> bool:
    """Whether a run's entry in the state is a `kit rerun`'s (RERUN_OF), not a batch's."""
    return bool(run.get(RERUN_OF))


def _run_order(run_dir: Path) -> tuple[str, float]:
    return run_dir.name, run_dir.stat().st_mtime  # run ids start with their start time


def _records_of(run_dir: Path, out: Path) -> list[dict]:
    """Every job of one run folder: its saved record, else one read from its result JSON."""
    records = []
    names = {p.name[: -len(RECORD_SUFFIX)] for p in run_dir.glob(f"*{RECORD_SUFFIX}")}
    names |= {
        p.stem
        for p in run_dir.glob("*.json")
        if not p.name.endswith(RECORD_SUFFIX) and p.name != RUN_FILE
    }
    for name in sorted(names):
        saved = run_dir / f"{name}{RECORD_SUFFIX}"
        record = _saved_record(saved) if saved.exists() else None
        if record is None:
            record = _record_from_results(name, run_dir, out)
        newest = max(p.stat().st_mtime for p in run_dir.glob(f"{name}.*"))
        record["finished_at"] = dt.datetime.fromtimestamp(newest).isoformat()
        records.append(record)
    return records


def _saved_run(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("jobs"), list) else None


def _saved_record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return (
        JobRecord.from_dict(data).to_dict() if isinstance(data, dict) and "name" in data else None
    )


def _record_from_results(name: str, run_dir: Path, out: Path) -> dict:
    """A record for a run without saved records; its empty fingerprint is never reused."""
    status, message, hardware = result_status(run_dir / f"{name}.json")
    notebook_out = run_dir / f"{name}.ipynb"
    notebook = ""
    try:
        meta = json.loads(notebook_out.read_text(encoding="utf-8"))["metadata"]["papermill"]
        notebook = Path(meta.get("input_path") or "").name
    except (OSError, KeyError, TypeError, json.JSONDecodeError):
        pass
    rel = lambda p: p.relative_to(out).as_posix()  # noqa: E731
    return JobRecord(
        name=name,
        notebook=notebook,
        status=status,
        run_id=run_dir.name,
        duration_s=0.0,
        fingerprint="",
        notebook_out=rel(notebook_out),
        html=rel(run_dir / f"{name}.html"),
        results=rel(run_dir / f"{name}.json"),
        message=message,
        hardware=hardware,
        note="rebuilt from its result JSON",
    ).to_dict()
