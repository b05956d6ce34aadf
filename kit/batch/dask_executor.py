"""The Dask executor: the batch's timed jobs on an existing Dask cluster (`--scheduler tcp://...`).

Workers declare their hardware as resources (`dask worker tcp://... --nthreads 1 --resources
"cpu=1"`, `"ipu=1"`, `"cuda=1"`); each timed job asks for one unit of its hardware, so two timed
jobs never share a device or a CPU host. A job runs on its worker exactly as it runs here (a child
process tree with the job's timeout) in a private temporary folder; the executed notebook, HTML,
JSON and anything else it wrote come back in the task's result and land in outputs/runs/<id>/.
A worker lost mid-job has its job re-run elsewhere by the scheduler; every start is logged as a
Dask event, so the record says how many attempts a job took and on which workers. The scheduler
is checked before connecting (kit.batch.dask_connect); workers that cannot run the kit, and
hardware no worker offers any more, fail their jobs with the reason (kit.batch.dask_health).
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from kit import atomic
from kit.batch.dask_connect import START_IT, check_scheduler
from kit.batch.dask_health import Liveness, cannot_run, offered, workers_without_kit
from kit.batch.executor import KERNEL, Task
from kit.batch.fingerprint import kit_digest
from kit.batch.jobs import hardware_resource
from kit.batch.local import run_notebook
from kit.batch.outcome import Outcome
from kit.batch.prepare import Prepared
from kit.batch.status import JobStatus
from kit.errors import BackendUnavailable
from kit.hardware.reuse import reuse_identity
from kit.paths import inside, outputs_dir, project_root

TOPIC = "kit-batch"


def run_on_worker(
    key: str,
    name: str,
    *,
    notebook: str,
    source: bytes,
    parameters: dict,
    timeout_s: float,
    digest: str,
    stop_event: str,
    job: dict | None = None,
) -> dict:
    """The Dask task: execute one notebook on this worker; returns the outcome and the files. `key`
    stays positional: `Client.submit` takes its own `key=` (the task's), the others pass by name."""
    from distributed import Event, get_worker

    worker = get_worker()
    host, worker_name = socket.gethostname(), str(worker.name)
    # the scheduler adds the worker's address as "worker"
    worker.log_event(TOPIC, {"key": key, "event": "started", "name": worker_name, "host": host})
    mine = kit_digest()
    if mine != digest:
        message = (
            f"host {host} runs a different kit/ (digest {mine}, this batch's is {digest}); "
            f"update its checkout"
        )
        failed = Outcome(JobStatus.FAILED, message, 0.0, host=host, worker=worker_name)
        return {"outcome": asdict(failed), "files": {}}
    stop = Event(stop_event)
    with tempfile.TemporaryDirectory(prefix=f"kit-{name}-") as tmp:
        source_path = Path(tmp) / "input" / notebook
        source_path.parent.mkdir()
        source_path.write_bytes(source)
        run = Path(tmp) / "run"
        run.mkdir()
        spec = {
            "input": str(source_path),
            "output": str(run / f"{name}.ipynb"),
            "html": str(run / f"{name}.html"),
            "kernel": KERNEL,
            "cwd": str(project_root()),
            "parameters": {**parameters, "results_path": str(run / f"{name}.json")},
            "job": job,
        }
        outcome = run_notebook(
            spec, timeout_s, outputs_dir(), should_stop=stop.is_set, env=notebook_env()
        )
        files = {
            p.relative_to(run).as_posix(): p.read_bytes() for p in run.rglob("*") if p.is_file()
        }
    outcome.worker = worker_name
    return {"outcome": asdict(outcome), "files": files}


def notebook_env() -> dict:
    """This worker's environment without the thread limits Dask's nanny sets in its worker
    processes (OMP_NUM_THREADS=1 and the like): a timed notebook must get the whole host, as it
    does in the embedded path. A value the host set itself differs from Dask's and is kept."""
    import dask

    injected = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    return {k: v for k, v in os.environ.items() if not (k in injected and str(injected[k]) == v)}


class DaskExecutor:
    """Submits every task at once; yields them as they finish, files written into run_dir."""

    def __init__(
        self,
        scheduler: str | object,
        *,
        connect_timeout_s: float = 10.0,
        lost_after_s: float = 60.0,
        poll_s: float = 0.2,
    ):
        from distributed import Client, Event

        if isinstance(scheduler, Client):
            self.client, self._own_client = scheduler, False
        else:
            check_scheduler(str(scheduler), connect_timeout_s)
            try:
                self.client = Client(scheduler, timeout=connect_timeout_s)
            except Exception as exc:  # noqa: BLE001 - every scheduler error is named, none is raw
                raise BackendUnavailable(
                    f"cannot connect to the Dask scheduler at {scheduler!r} "
                    f"({type(exc).__name__}: {str(exc)[:200]}); {START_IT}"
                ) from None
            self._own_client = True
        self.digest = kit_digest()
        self.poll_s = poll_s
        self._liveness = Liveness(self.client, lost_after_s)
        self._stop = Event(f"kit-stop-{uuid.uuid4().hex}", client=self.client)
        self._futures: dict = {}

    def prepare(self, tasks: list[Task]) -> list[Prepared]:
        return []  # each worker exports (and compiles) into its own cache when its job runs

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]:
        if not tasks:
            return
        try:
            workers = set(self.client.scheduler_info()["workers"])
            offers, no_kit = self.offered(), workers_without_kit(self.client)
        except Exception as exc:  # noqa: BLE001 - a scheduler gone since connecting: named, not raw
            raise BackendUnavailable(
                f"lost the Dask scheduler at {self.client.scheduler.address} "
                f"({type(exc).__name__}: {str(exc)[:200]}); {START_IT}"
            ) from None
        if not workers:
            raise BackendUnavailable(
                f"the Dask scheduler at {self.client.scheduler.address} has no "
                f"workers; start them with `dask worker` (docs/cluster.md)"
            )
        for task in tasks:
            resource = hardware_resource(task.job)
            problem = cannot_run(resource, offers, workers, no_kit)
            if problem:
                yield task, Outcome(JobStatus.FAILED, problem, 0.0)
                continue
            self._futures[self._submit(task, resource)] = task
        while self._futures:
            done = [f for f in self._futures if f.done()]
            for future in done:
                task = self._futures.pop(future)
                yield task, self._collect(future, task)
            if not done:
                yield from self._given_up()
                time.sleep(self.poll_s)

    def _given_up(self) -> Iterator[tuple[Task, Outcome]]:
        """The waiting jobs whose hardware no worker has offered for a while, failed with why."""
        given_up = self._liveness.given_up(
            [hardware_resource(t.job) for t in self._futures.values()]
        )
        for future, task in list(self._futures.items()):
            why = given_up.get(hardware_resource(task.job))
            if why:
                self._futures.pop(future)
                future.cancel()
                yield (
                    task,
                    Outcome(
                        JobStatus.FAILED,
                        why,
                        time.perf_counter() - (task.started or time.perf_counter()),
                    ),
                )

    def _submit(self, task: Task, resource: str | None):
        job = task.job
        key = f"kit-{task.run_dir.name}-{job.name}"
        source = task.notebook_path().read_bytes()
        task.started = time.perf_counter()
        return self.client.submit(
            run_on_worker,
            key,
            job.name,
            notebook=job.notebook,
            source=source,
            parameters=job.parameters,
            timeout_s=job.timeout_s,
            digest=self.digest,
            stop_event=self._stop.name,
            job=task.provenance(),
            key=key,
            pure=False,
            resources={resource: 1} if resource else None,
        )

    def _collect(self, future, task: Task) -> Outcome:
        from distributed import KilledWorker

        seconds = time.perf_counter() - (task.started or time.perf_counter())
        try:
            payload = future.result()
        except KilledWorker as exc:
            outcome = Outcome(
                JobStatus.KILLED,
                f"every worker that ran it died (Dask KilledWorker: {exc})",
                seconds,
            )
        except Exception as exc:  # noqa: BLE001 - any task error becomes this job's failure
            outcome = Outcome(JobStatus.FAILED, f"{type(exc).__name__}: {exc}"[:300], seconds)
        else:
            for rel, data in payload["files"].items():
                atomic.write_bytes(inside(task.run_dir, rel), data)
            outcome = Outcome(**payload["outcome"])
        try:
            starts = [m for _, m in self.client.get_events(TOPIC) if m.get("key") == future.key]
        except Exception:  # noqa: BLE001
            # the scheduler is gone: the outcome stands without its attempts
            starts = []
        outcome.attempts = max(1, len(starts))
        if len(starts) > 1:
            path = " -> ".join(
                f"{s['name']} ({s.get('worker', '?')}) on {s['host']}" for s in starts
            )
            outcome.note = f"worker lost mid-job; re-run from the start ({path})"
        if starts and not outcome.worker:
            outcome.worker, outcome.host = starts[-1]["name"], starts[-1]["host"]
        return outcome

    def offered(self) -> dict[str, set[str]]:
        """The resources at least one worker of the cluster offers, each with those workers."""
        return offered(self.client.scheduler_info()["workers"])

    def hardware_parts(self, kind: str) -> list[str]:
        """The distinct parts of `kind` among the workers offering it, with what else their figures
        depend on (kit.hardware.reuse.reuse_identity: cores, CPU flags, thread settings)."""
        workers = sorted(self.offered().get(kind, ()))
        answers = (
            self.client.run(reuse_identity, kind, workers=workers, on_error="return")
            if workers
            else {}
        )
        return sorted({a for a in answers.values() if isinstance(a, str)})

    def in_flight(self) -> list[Task]:
        return list(self._futures.values())

    def stop(self) -> None:
        """Tell running tasks to kill their notebooks, and drop the queued ones."""
        self._stop.set()
        self.client.cancel(list(self._futures))
        self._futures.clear()

    def close(self) -> None:
        if self._own_client:
            self.client.close()
