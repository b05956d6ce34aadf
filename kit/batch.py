"""`make reproduce`: run the study notebooks with papermill, render HTML, write the index.

Each notebook runs in its own process (a hard per-notebook timeout kills it and its kernel);
a failure is recorded and the batch goes on. A notebook whose inputs and parameters are unchanged
since its last successful run is reused, not re-run (`--force` re-runs). Every run has its own
folder under outputs/runs/<run_id>/; nothing is overwritten.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit.paths import notebooks_dir, outputs_dir, project_root

KERNEL = "ipu-repro"
STATE_FILE = "state.json"


@dataclass
class Job:
    """One notebook execution: `name` is unique within a profile."""

    name: str
    notebook: str
    parameters: dict = field(default_factory=dict)
    timeout_s: int = 600
    after_all: bool = False  # runs once the others are done (the scorecard)


@dataclass
class JobRecord:
    name: str
    notebook: str
    status: str  # "ok", "error" (notebook ran, kit reported errors), "failed", "timeout"
    run_id: str
    duration_s: float
    fingerprint: str
    notebook_out: str
    html: str
    results: str
    message: str = ""
    reused: bool = False
    hardware: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def inputs_fingerprint(job: Job, extra: str = "") -> str:
    """Hash of everything a notebook's output depends on: notebook, parameters, kit, data."""
    root = project_root()
    h = hashlib.sha256()
    h.update((notebooks_dir() / job.notebook).read_bytes())
    params = {k: v for k, v in job.parameters.items() if k != "results_path"}  # differs per run
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(extra.encode())
    for path in sorted((root / "kit").rglob("*.py")) + sorted((root / "data" / "published").glob("*.csv")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def new_run_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def load_state(out: Path) -> dict:
    path = out / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {"jobs": {}, "runs": []}


def save_state(out: Path, state: dict) -> None:
    tmp = out / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(out / STATE_FILE)


def reusable(previous: dict | None, fingerprint: str, out: Path) -> bool:
    return bool(previous and previous["fingerprint"] == fingerprint and previous["status"] == "ok"
                and (out / previous["html"]).exists() and (out / previous["results"]).exists())


def execute(job: Job, run_dir: Path, out: Path) -> tuple[str, str, float]:
    """Run one notebook in a child process; returns (status, one-line message, seconds)."""
    spec = {"input": str(notebooks_dir() / job.notebook), "output": str(run_dir / f"{job.name}.ipynb"),
            "html": str(run_dir / f"{job.name}.html"), "parameters": job.parameters,
            "kernel": KERNEL, "cwd": str(project_root())}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kit.batch_worker", json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "KIT_OUTPUTS": str(out)})
    try:
        output, _ = proc.communicate(timeout=job.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", f"timed out after {job.timeout_s} s", time.perf_counter() - started
    seconds = time.perf_counter() - started
    last = [line for line in output.strip().splitlines() if line.strip()]
    if proc.returncode != 0:
        return "failed", (last[-1] if last else f"exit code {proc.returncode}"), seconds
    return "ok", "", seconds


def result_status(results: Path) -> tuple[str, str, str]:
    """(status, message, hardware) from the notebook's results JSON."""
    if not results.exists():
        return "failed", "notebook wrote no results JSON", ""
    data = json.loads(results.read_text())
    errors = data.get("errors") or []
    status = "ok" if data.get("status") == "ok" and not errors else "error"
    return status, "; ".join(errors)[:300], hardware_label(data)


def hardware_label(data: dict) -> str:
    """'<device> (<kind>, <cores>): <backend> <precision>', or '' for runs that time nothing."""
    backend = data.get("backend") or {}
    if not backend:
        return ""
    info = backend.get("device_info") or {}
    cores = info.get("cores")
    label = (f"{info.get('name', '?')} ({info.get('kind', '?')}{f', {cores} cores' if cores else ''}): "
             f"{backend.get('name')} {backend.get('precision')}")
    if (backend.get("session") or {}).get("emulated"):
        label += " [IPU path emulated: not run on an IPU]"
    return label


def run_jobs(jobs: list[Job], *, force: bool = False, out: Path | None = None, context: str = "",
             progress=None) -> list[JobRecord]:
    """Run (or reuse) every job, then the after_all jobs; returns this batch's records."""
    out = out or outputs_dir()
    out.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id()
    run_dir = out / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    state = load_state(out)
    records: list[JobRecord] = []
    ordered = [j for j in jobs if not j.after_all] + [j for j in jobs if j.after_all]
    for job in ordered:
        if job.after_all:
            job.parameters["result_files"] = [r.results for r in records]
        job.parameters["results_path"] = str((run_dir / f"{job.name}.json").relative_to(out))
        fingerprint = inputs_fingerprint(job, context + _result_hashes(job, out))
        previous = state["jobs"].get(job.name)
        if not force and reusable(previous, fingerprint, out):
            record = JobRecord(**{**previous, "reused": True})
        else:
            record = run_one(job, run_id, run_dir, out, fingerprint)
            state["jobs"][job.name] = record.to_dict()
            save_state(out, state)
        records.append(record)
        if progress:
            progress(record)
    state["runs"].append({"run_id": run_id, "jobs": [r.name for r in records],
                          "finished_at": dt.datetime.now().isoformat(timespec="seconds")})
    save_state(out, state)
    return records


def _result_hashes(job: Job, out: Path) -> str:
    files = job.parameters.get("result_files", [])
    return "".join(hashlib.sha1((out / f).read_bytes()).hexdigest() for f in files if (out / f).exists())


def run_one(job: Job, run_id: str, run_dir: Path, out: Path, fingerprint: str) -> JobRecord:
    params = {**job.parameters, "results_path": str(out / job.parameters["results_path"])}
    status, message, seconds = execute(Job(job.name, job.notebook, params, job.timeout_s), run_dir, out)
    results = run_dir / f"{job.name}.json"
    hardware = ""
    if status == "ok":
        status, message, hardware = result_status(results)
    rel = lambda p: str(p.relative_to(out))  # noqa: E731
    return JobRecord(job.name, job.notebook, status, run_id, round(seconds, 1), fingerprint,
                     rel(run_dir / f"{job.name}.ipynb"), rel(run_dir / f"{job.name}.html"),
                     rel(results), message, False, hardware)
