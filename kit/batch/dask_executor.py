"""The Dask executor: the batch's timed jobs on an existing Dask cluster (`--scheduler tcp://...`).

Workers declare their hardware as resources (`dask worker tcp://... --nthreads 1 --resources
"cpu=1"`, `"ipu=1"`, `"cuda=1"`); each timed job asks for one unit of its hardware, so two timed
jobs never share a device or a CPU host. A job runs on its worker exactly as it runs here (a child
process tree with the job's timeout) in a private temporary folder; the executed notebook, HTML,
JSON and anything else it wrote come back in the task's result and land in outputs/runs/<id>/.
A worker lost mid-job has its job re-run elsewhere by the scheduler; every start is logged as a
Dask event, so the record says how many attempts a job took and on which workers.
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
from kit.batch.executor import KERNEL, Task
from kit.batch.fingerprint import kit_digest
from kit.batch.jobs import hardware_resource
from kit.batch.local import run_notebook
from kit.batch.outcome import Outcome
from kit.errors import BackendUnavailable
from kit.paths import notebooks_dir, outputs_dir, project_root

TOPIC = "kit-batch"


def run_on_worker(key: str, name: str, notebook: str, source: bytes, parameters: dict,
                  timeout_s: float, digest: str, stop_event: str, job: dict | None = None) -> dict:
    """The Dask task: execute one notebook on this worker; returns the outcome and the files."""
    from distributed import Event, get_worker

    worker = get_worker()
    host, worker_name = socket.gethostname(), str(worker.name)
    # the scheduler adds the worker's address as "worker"
    worker.log_event(TOPIC, {"key": key, "event": "started", "name": worker_name, "host": host})
    mine = kit_digest()
    if mine != digest:
        message = (f"host {host} runs a different kit/ (digest {mine}, this batch's is {digest}); "
                   f"update its checkout")
        return {"outcome": asdict(Outcome("failed", message, 0.0, host, worker_name)), "files": {}}
    stop = Event(stop_event)
    with tempfile.TemporaryDirectory(prefix=f"kit-{name}-") as tmp:
        source_path = Path(tmp) / "input" / notebook
        source_path.parent.mkdir()
        source_path.write_bytes(source)
        run = Path(tmp) / "run"
        run.mkdir()
        spec = {"input": str(source_path), "output": str(run / f"{name}.ipynb"),
                "html": str(run / f"{name}.html"), "kernel": KERNEL, "cwd": str(project_root()),
                "parameters": {**parameters, "results_path": str(run / f"{name}.json")}, "job": job}
        outcome = run_notebook(spec, timeout_s, outputs_dir(), should_stop=stop.is_set, env=notebook_env())
        files = {p.relative_to(run).as_posix(): p.read_bytes() for p in run.rglob("*") if p.is_file()}
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

    def __init__(self, scheduler: str | object, *, connect_timeout_s: float = 10.0):
        from distributed import Client, Event

        if isinstance(scheduler, Client):
            self.client, self._own_client = scheduler, False
        else:
            try:
                self.client = Client(scheduler, timeout=connect_timeout_s)
            except (OSError, TimeoutError, ValueError) as exc:
                raise BackendUnavailable(f"cannot reach the Dask scheduler at {scheduler!r} "
                                         f"({type(exc).__name__}: {exc}); start it with "
                                         f"`dask scheduler` (docs/cluster.md)") from None
            self._own_client = True
        self.digest = kit_digest()
        self._stop = Event(f"kit-stop-{uuid.uuid4().hex}", client=self.client)
        self._futures: dict = {}

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]:
        from distributed import as_completed

        if tasks and not self.client.scheduler_info()["workers"]:
            raise BackendUnavailable(f"the Dask scheduler at {self.client.scheduler.address} has no "
                                     f"workers; start them with `dask worker` (docs/cluster.md)")
        offered = self.offered()
        for task in tasks:
            resource = hardware_resource(task.job)
            if resource and resource not in offered:
                yield task, Outcome("failed", f"no worker of this cluster offers {resource!r} (workers "
                                    f"offer: {', '.join(sorted(offered)) or 'nothing'}); start one with "
                                    f"`dask worker ... --resources {resource}=1`", 0.0)
                continue
            self._futures[self._submit(task, resource)] = task
        for future in as_completed(list(self._futures)):
            task = self._futures.pop(future)
            yield task, self._collect(future, task)

    def _submit(self, task: Task, resource: str | None):
        job = task.job
        key = f"kit-{task.run_dir.name}-{job.name}"
        source = (notebooks_dir() / job.notebook).read_bytes()
        task.started = time.perf_counter()
        return self.client.submit(run_on_worker, key, job.name, job.notebook, source, job.parameters,
                                  job.timeout_s, self.digest, self._stop.name, task.provenance(), key=key,
                                  pure=False,
                                  resources={resource: 1} if resource else None)

    def _collect(self, future, task: Task) -> Outcome:
        from distributed import KilledWorker

        seconds = time.perf_counter() - (task.started or time.perf_counter())
        try:
            payload = future.result()
        except KilledWorker as exc:
            outcome = Outcome("killed", f"every worker that ran it died (Dask KilledWorker: {exc})", seconds)
        except Exception as exc:  # noqa: BLE001 - any task error becomes this job's failure
            outcome = Outcome("failed", f"{type(exc).__name__}: {exc}"[:300], seconds)
        else:
            for rel, data in payload["files"].items():
                atomic.write_bytes(_inside(task.run_dir, rel), data)
            outcome = Outcome(**payload["outcome"])
        starts = [m for _, m in self.client.get_events(TOPIC) if m.get("key") == future.key]
        outcome.attempts = max(1, len(starts))
        if len(starts) > 1:
            path = " -> ".join(f"{s['name']} ({s.get('worker', '?')}) on {s['host']}" for s in starts)
            outcome.note = f"worker lost mid-job; re-run from the start ({path})"
        if starts and not outcome.worker:
            outcome.worker, outcome.host = starts[-1]["name"], starts[-1]["host"]
        return outcome

    def offered(self) -> set[str]:
        """The resources at least one worker of the cluster offers."""
        workers = self.client.scheduler_info()["workers"].values()
        return {name for w in workers for name, amount in (w.get("resources") or {}).items() if amount >= 1}

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


def _inside(folder: Path, rel: str) -> Path:
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ValueError(f"a worker returned a file outside its run folder: {rel!r}")
    return path
