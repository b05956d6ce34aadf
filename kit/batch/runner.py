"""`make reproduce`: run the study notebooks with papermill, render HTML, keep the state.

Each notebook runs in its own process tree (a hard per-notebook timeout kills it, kernel
included); a failure is recorded and the batch goes on. A notebook whose inputs and parameters
are unchanged since its last successful run is reused, not re-run (`force` re-runs). Every run
has its own folder under outputs/runs/<run_id>/; nothing is overwritten. One batch at a time
holds outputs/; an interrupt stops the running notebook, records it as `interrupted` and leaves
a valid state for the next run to resume from.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kit import atomic
from kit.batch.executor import Executor, Task
from kit.batch.fingerprint import inputs_fingerprint, kit_digest, result_hashes
from kit.batch.interrupts import BatchInterrupted, interrupts_raise
from kit.batch.jobs import Job, JobRecord
from kit.batch.local import LocalExecutor
from kit.batch.lock import outputs_lock
from kit.batch.outcome import Outcome, result_status
from kit.batch.prepare import Prepared
from kit.batch.state import RERUN_OF, RUN_FILE, read_state, save_record, save_state
from kit.batch.status import BatchRunStatus, JobStatus
from kit.paths import inside, outputs_dir
from kit.results import version_problem


def new_run_dir(out: Path) -> tuple[str, Path]:
    """A fresh outputs/runs/<run_id>/: start time, pid and a random part; never reused."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = f"{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}-{secrets.token_hex(2)}"
        try:
            (runs / run_id).mkdir()
            return run_id, runs / run_id
        except FileExistsError:
            continue


def reusable(previous: dict | None, fingerprint: str, out: Path) -> bool:
    return bool(
        previous
        and previous["fingerprint"]
        and previous["fingerprint"] == fingerprint
        and previous["status"] == JobStatus.OK
        and (out / previous["html"]).exists()
        and readable(out / previous["results"])
    )


def readable(result: Path) -> bool:
    """Whether this kit can read the result JSON: one edited by hand, copied from a newer kit
    (another schema_version) or cut short is run again rather than reused."""
    try:
        data = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and version_problem(data) is None


class BatchProgress(Protocol):
    """What the batch tells its progress display: `start` once the batch holds outputs/ (a batch
    refused because another holds it draws nothing), then each finished job's record."""

    def start(self) -> None: ...

    def __call__(self, record: JobRecord) -> None: ...


class Batch:
    """One run of the runner: its state, folder and records, saved after every job."""

    def __init__(
        self,
        out: Path,
        state: dict,
        context: str,
        progress: BatchProgress | None,
        command: str = "",
        labels: Mapping[str, str] | None = None,
        rerun_of: str = "",
    ):
        self.out, self.state, self.context, self.progress = out, state, context, progress
        self.command, self.rerun_of = command, rerun_of
        self.run_id, self.run_dir = new_run_dir(out)
        self.records: dict[str, JobRecord] = {}
        self.digest = kit_digest()
        self.run: dict[str, Any] = {
            "run_id": self.run_id,
            **(labels or {}),
            "jobs": [],
            "started_at": _now(),
            "finished_at": "",
            "status": BatchRunStatus.RUNNING,
            **({RERUN_OF: rerun_of} if rerun_of else {}),
        }
        for stale in state["runs"]:  # this batch holds the lock: no other one is running
            if stale.get("status") == BatchRunStatus.RUNNING:
                stale["status"] = BatchRunStatus.ABORTED
                stale["note"] = "its end was never recorded (killed, or its disk was full)"
        state["runs"].append(self.run)
        self.save()

    def save(self) -> None:
        save_state(self.out, self.state)
        atomic.write_text(inside(self.run_dir, RUN_FILE), json.dumps(self.run, indent=1))

    def tasks(self, jobs: list[Job], force: bool) -> list[Task]:
        """Tasks for the jobs that cannot be reused; reused ones are recorded at once."""
        tasks = []
        for job in jobs:
            if job.after_all:
                job.parameters["result_files"] = [r.results for r in self.records.values()]
            job.parameters["results_path"] = f"runs/{self.run_id}/{job.name}.json"
            fingerprint = inputs_fingerprint(
                job, self.context + result_hashes(job, self.out), digest=self.digest
            )
            previous = self.state["jobs"].get(job.name)
            if not force and reusable(previous, fingerprint, self.out):
                self.add(JobRecord.from_dict({**previous, "reused": True}), saved=True)
            else:
                tasks.append(
                    Task(
                        job=job,
                        run_dir=self.run_dir,
                        out=self.out,
                        fingerprint=fingerprint,
                        command=self.command,
                    )
                )
        return tasks

    def prepared(self, steps: list[Prepared]) -> None:
        """Record what the executor made before the jobs (the run file keeps it)."""
        made = [done for done in steps if done.made or done.failed]
        for done in made:
            self.run[done.step.run_key] = done.to_dict()
        if made:
            self.save()

    def finish(self, task: Task, outcome: Outcome) -> JobRecord:
        status, message, hardware = outcome.status, outcome.message, ""
        if status == JobStatus.OK:
            status, message, hardware = result_status(task.path(".json"))
        rel = lambda p: p.relative_to(self.out).as_posix()  # noqa: E731
        record = JobRecord(
            name=task.job.name,
            notebook=task.job.notebook,
            status=status,
            run_id=self.run_id,
            duration_s=round(outcome.seconds, 1),
            fingerprint=task.fingerprint,
            notebook_out=rel(task.path(".ipynb")),
            html=rel(task.path(".html")),
            results=rel(task.path(".json")),
            message=message,
            reused=False,
            hardware=hardware,
            host=outcome.host,
            worker=outcome.worker,
            attempts=outcome.attempts,
            note=outcome.note,
        )
        self.add(record)
        return record

    def add(self, record: JobRecord, saved: bool = False) -> None:
        self.records[record.name] = record
        if record.name not in self.run["jobs"]:
            self.run["jobs"].append(record.name)
        if not saved:
            save_record(self.out, record)
        if not saved and not self.rerun_of:  # a rerun keeps to its own folder (RERUN_OF)
            self.state["jobs"][record.name] = record.to_dict()
        self.save()
        if self.progress:
            self.progress(record)

    def interrupted(self, tasks: list[Task], signum: int) -> None:
        """Record the tasks that were running when the batch was stopped."""
        for task in tasks:
            seconds = time.perf_counter() - task.started if task.started else 0.0
            how = signal.Signals(signum).name + (" (Ctrl-C)" if signum == signal.SIGINT else "")
            self.finish(
                task,
                Outcome(
                    JobStatus.INTERRUPTED,
                    f"batch stopped by {how}; the next run re-runs it",
                    seconds,
                ),
            )

    def close(self, status: BatchRunStatus) -> None:
        self.run.update(status=status, finished_at=_now())
        self.save()


def run_jobs(
    jobs: list[Job],
    *,
    force: bool = False,
    out: Path | None = None,
    context: str = "",
    progress: BatchProgress | None = None,
    executor: Executor | None = None,
    command: str = "",
    warm: str = "off",
    labels: Mapping[str, str] | None = None,
    rerun_of: str = "",
) -> list[JobRecord]:
    """Run (or reuse) every job, then the after_all jobs; returns this batch's records in job order.

    `command` is the command line that started the batch; every result records it beside its job.
    `warm` (auto, on, off): which jobs run on this machine share one warm kernel
    (kit.batch.jobs.runs_warm). `labels` (e.g. its profile and hardware) go into the batch's entry
    in the state, for a later plan to find it by (kit.batch.past_runs). `rerun_of` (the result
    `kit rerun` runs again): the batch writes its own run folder and is listed among the runs, but
    its records never replace the state's records of the jobs, nor is it the index's batch.

    `executor` runs the jobs that time something (default: this machine, one at a time); the
    after_all jobs, which read the others' results, always run here. Raises OutputsBusy when
    another batch holds `out`, CorruptState when outputs/state.json is unusable, and
    BatchInterrupted (with `.records`) on SIGINT/SIGTERM.
    """
    out = out or outputs_dir()
    local = LocalExecutor(warm=warm)
    phases = [
        ([j for j in jobs if not j.after_all], executor or local),
        ([j for j in jobs if j.after_all], local),
    ]
    with outputs_lock(out):
        state = read_state(out)  # before anything is created
        batch = Batch(out, state, context, progress, command, labels, rerun_of)
        if progress:
            progress.start()
        with interrupts_raise():
            try:
                for phase_jobs, runner in phases:
                    batch.records = {r.name: r for r in _in_order(jobs, batch.records)}
                    tasks = batch.tasks(phase_jobs, force)
                    batch.prepared(runner.prepare(tasks))
                    for task, outcome in runner.run(tasks):
                        batch.finish(task, outcome)
            except BatchInterrupted as stop:
                for runner in {id(r): r for _, r in phases}.values():
                    in_flight = runner.in_flight()
                    runner.stop()
                    batch.interrupted(in_flight, stop.signum)
                batch.close(BatchRunStatus.INTERRUPTED)
                stop.records = _in_order(jobs, batch.records)
                raise
            except BaseException:
                with contextlib.suppress(OSError):
                    # a full disk: the first error is the one to report
                    batch.close(BatchRunStatus.ABORTED)
                raise
            finally:
                for _, runner in phases:
                    runner.close()
        batch.close(BatchRunStatus.COMPLETE)
    return _in_order(jobs, batch.records)


def _in_order(jobs: list[Job], records: dict[str, JobRecord]) -> list[JobRecord]:
    ordered = [j for j in jobs if not j.after_all] + [j for j in jobs if j.after_all]
    return [records[j.name] for j in ordered if j.name in records]


def _now() -> str:
    return dt.datetime.now().isoformat(timespec="seconds")
