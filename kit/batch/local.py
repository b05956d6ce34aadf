"""The embedded executor: each notebook in a child process on this machine, one at a time.

The child (kit.batch.worker) runs in a session of its own; at its time limit, on an interrupt or
on `stop()`, its whole process tree is killed, kernel included.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kit.batch.executor import Task
from kit.batch.outcome import Outcome
from kit.batch.prepare import Prepared, missing_exports, parallel_exports, prepared
from kit.batch.proctree import kill_tree
from kit.batch.status import JobStatus
from kit.batch.worker import EXIT_KILLED
from kit.measure.memory import Peak, child_peak, oom_message, running_peak_rss_bytes
from kit.models.export_child import remove_leftovers

POLL_S = 0.05


def run_notebook(
    spec: dict,
    timeout_s: float,
    outputs: Path,
    should_stop: Callable[[], bool] | None = None,
    env: dict | None = None,
) -> Outcome:
    """Execute one notebook spec in a child process; the Outcome says how it ended.

    `should_stop` is asked about once a second; True stops the notebook (status interrupted).
    `env` replaces this process's environment (KIT_OUTPUTS is always set to `outputs`).
    An exception raised meanwhile (an interrupt) kills the child's tree before it propagates.
    """
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kit.batch.worker", json.dumps(spec)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**(os.environ if env is None else env), "KIT_OUTPUTS": str(outputs)},
        )
        try:
            ended = _wait(proc, started + timeout_s, should_stop)
        except BaseException:
            _kill(proc)
            raise
        seconds = time.perf_counter() - started
        if ended is None or ended == "stop":
            _kill(proc)
            if ended == "stop":
                return Outcome(
                    JobStatus.INTERRUPTED,
                    "stopped by the batch",
                    seconds,
                    host=socket.gethostname(),
                )
            return Outcome(
                JobStatus.TIMEOUT,
                f"timed out after {timeout_s} s",
                seconds,
                host=socket.gethostname(),
            )
        code, peak = ended
        log.seek(0)
        lines = [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    return _outcome(code, peak, lines, seconds)


def _outcome(code: int, peak: Peak, lines: list[str], seconds: float) -> Outcome:
    host = socket.gethostname()
    if code == 0:
        return Outcome(JobStatus.OK, "", seconds, host=host)
    if code == EXIT_KILLED:
        return Outcome(
            JobStatus.KILLED,
            lines[-1] if lines else oom_message("killed", None),
            seconds,
            host=host,
        )
    if code < 0:  # the child itself died of a signal
        how = f"killed by {signal.Signals(-code).name}"
        return Outcome(JobStatus.KILLED, oom_message(how, peak), seconds, host=host)
    return Outcome(
        JobStatus.FAILED, lines[-1] if lines else f"exit code {code}", seconds, host=host
    )


def _wait(proc: subprocess.Popen, deadline: float, should_stop: Callable[[], bool] | None):
    """(exit code, peak RSS of the child or its reaped children), None at the deadline, or "stop"
    when should_stop() said so."""
    next_ask = time.perf_counter() + 1.0
    seen = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, child_peak(usage.ru_maxrss * 1024, seen)
        now = time.perf_counter()
        if now >= deadline:
            return None
        if now >= next_ask:  # once a second: the job's timed windows run beside this loop
            seen = max(seen, running_peak_rss_bytes(proc.pid) or 0)
            if should_stop and should_stop():
                return "stop"
            next_ask = now + 1.0
        time.sleep(min(POLL_S, deadline - now))


def _kill(proc: subprocess.Popen) -> None:
    if proc.returncode is not None:  # already reaped: its pid may belong to another process now
        return
    pids = kill_tree(proc.pid)
    try:
        os.waitpid(proc.pid, 0)
    except ChildProcessError:  # already reaped
        pass
    proc.returncode = -signal.SIGKILL
    remove_leftovers(pids)  # an export killed mid-way: its temporary files and folder


PREPARE_LIMIT_S = 1800.0  # the exports side by side; past it, the jobs export what is left


def prepare_exports(tasks: list[Task]) -> Prepared:
    """The full-size exports the tasks load and no cache holds, made side by side in a child
    process (its tree killed on an interrupt or at PREPARE_LIMIT_S) where this machine has the
    cores and memory for two or more at once (kit.batch.prepare); else nothing."""
    requests = missing_exports(t.job for t in tasks)
    workers = parallel_exports(requests)
    if workers < 2:
        return Prepared()
    print(
        f"exporting {len(requests)} model(s) to ONNX, {workers} at a time, before the first job "
        "(cached after this)",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kit.batch.prepare",
                json.dumps([r.to_dict() for r in requests]),
                str(workers),
            ],
            stdout=log,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            ended = _wait(proc, started + PREPARE_LIMIT_S, None)
        except BaseException:
            _kill(proc)
            log.seek(0)
            export_records(log.read().decode(errors="replace"))  # its notes, even when interrupted
            raise
        if ended is None:
            _kill(proc)
        log.seek(0)
        records = export_records(log.read().decode(errors="replace"))
    done = prepared(records, workers, time.perf_counter() - started)
    print(done.summary() or "no export made side by side", file=sys.stderr, flush=True)
    return done


def export_records(output: str) -> list[dict]:
    """The export records among the JSON lines the prepare child printed; its notes (a cache entry
    it discarded) are printed on this console as warnings."""
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    for note in (r["note"] for r in lines if "note" in r):
        print(f"warning: {note}", file=sys.stderr, flush=True)
    return [r for r in lines if "model" in r]


class LocalExecutor:
    """Runs tasks one after another on this machine."""

    def __init__(self) -> None:
        self._current: Task | None = None

    def prepare(self, tasks: list[Task]) -> Prepared:
        return prepare_exports(tasks)

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            self._current = task
            task.started = time.perf_counter()
            outcome = run_notebook(task.spec(), task.job.timeout_s, task.out)
            self._current = None
            yield task, outcome

    def in_flight(self) -> list[Task]:
        return [self._current] if self._current else []

    def stop(self) -> None:
        self._current = None  # run_notebook killed its child when the interrupt passed through

    def close(self) -> None:
        pass
