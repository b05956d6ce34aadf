"""The embedded executor: each notebook in a child process on this machine, one at a time.

The child (kit.batch.worker) runs in a session of its own; at its time limit, on an interrupt or
on `stop()`, its whole process tree is killed, kernel included. In the warm mode the model rows
share one such child and its kernel (WarmWorker), under the same limits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kit.batch.executor import Task
from kit.batch.jobs import check_warm_mode, runs_warm
from kit.batch.outcome import Outcome
from kit.batch.prepare import (
    Prepared,
    Step,
    compile_requests,
    missing_exports,
    parallel_compiles,
    parallel_exports,
    prepared,
)
from kit.batch.proctree import kill_tree
from kit.batch.status import JobStatus
from kit.batch.worker import EXIT_FAILED, EXIT_KILLED, remove_kernel_sockets
from kit.hardware.cuda import first_gpu_free_bytes
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
            env=_child_env(outputs, env),
        )
        try:
            ended = _wait(proc, started + timeout_s, should_stop)
        except BaseException:
            _kill(proc)
            raise
        seconds = time.perf_counter() - started
        if not isinstance(ended, tuple):
            _kill(proc)
            return _stopped(ended, timeout_s, seconds)
        code, peak = ended
        log.seek(0)
        lines = _lines(log.read())
    return _outcome(code, peak, lines, seconds)


def _child_env(outputs: Path, env: dict | None) -> dict:
    return {**(os.environ if env is None else env), "KIT_OUTPUTS": str(outputs)}


def _lines(output: bytes) -> list[str]:
    return [line for line in output.decode(errors="replace").splitlines() if line.strip()]


def _stopped(ended: str | None, timeout_s: float, seconds: float) -> Outcome:
    """The Outcome of a child stopped by the batch ("stop") or at its time limit (None)."""
    if ended == STOP:
        return Outcome(
            JobStatus.INTERRUPTED, "stopped by the batch", seconds, host=socket.gethostname()
        )
    return Outcome(
        JobStatus.TIMEOUT, f"timed out after {timeout_s} s", seconds, host=socket.gethostname()
    )


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


STOP, REPLIED = "stop", "replied"


def _wait(
    proc: subprocess.Popen,
    deadline: float,
    should_stop: Callable[[], bool] | None,
    replied: Callable[[], bool] | None = None,
) -> tuple[int, Peak] | str | None:
    """(exit code, peak RSS of the child or its reaped children), None at the deadline, STOP when
    should_stop() said so, or REPLIED once `replied()` (a warm worker's job) is true."""
    next_ask = time.perf_counter() + 1.0
    seen = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, child_peak(usage.ru_maxrss * 1024, seen)
        if replied and replied():
            return REPLIED
        now = time.perf_counter()
        if now >= deadline:
            return None
        if now >= next_ask:  # once a second: the job's timed windows run beside this loop
            seen = max(seen, running_peak_rss_bytes(proc.pid) or 0)
            if should_stop and should_stop():
                return STOP
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
    remove_kernel_sockets(pids)  # a worker killed with its kernel: the kernel's socket files


PREPARE_LIMIT_S = 1800.0  # one prepare step; past it, the jobs export (or compile) what is left


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
    return prepare_in_child(Step.EXPORTS, [r.to_dict() for r in requests], workers)


def prepare_compiles(tasks: list[Task]) -> Prepared:
    """The torch.compile candidates the tasks' searches will probe, compiled side by side in a
    child process where this machine has the cores and memory for two or more at once
    (kit.batch.prepare, kit.search.ahead); else nothing (each search compiles its own)."""
    requests = compile_requests(t.job for t in tasks)
    workers = parallel_compiles(requests, device_free=first_gpu_free_bytes()) if requests else 0
    if workers < 2:
        return Prepared(step=Step.COMPILES)
    print(
        f"compiling {len(requests)} torch.compile candidate(s), {workers} at a time, before the "
        "first job (the searches read them from inductor's caches)",
        file=sys.stderr,
        flush=True,
    )
    return prepare_in_child(Step.COMPILES, [r.to_dict() for r in requests], workers)


def prepare_in_child(step: Step, requests: list[dict], workers: int) -> Prepared:
    """One prepare step (kit.batch.prepare's `step`) in a child process, its tree killed on an
    interrupt or at PREPARE_LIMIT_S; what it made, and what it printed of discarded cache entries
    said on this console."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kit.batch.prepare", step, json.dumps(requests), str(workers)],
            stdout=log,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            ended = _wait(proc, started + PREPARE_LIMIT_S, None)
        except BaseException:
            _kill(proc)
            log.seek(0)
            prepare_records(log.read().decode(errors="replace"), step)  # its notes, interrupted too
            raise
        if ended is None:
            _kill(proc)
        log.seek(0)
        records = prepare_records(log.read().decode(errors="replace"), step)
    done = prepared(records, workers, time.perf_counter() - started, step)
    print(done.summary() or f"nothing made side by side ({step})", file=sys.stderr, flush=True)
    return done


def prepare_records(output: str, step: Step = Step.EXPORTS) -> list[dict]:
    """The step's records among the JSON lines the prepare child printed; its notes (a cache entry
    it discarded) are printed on this console as warnings."""
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    for note in (r["note"] for r in lines if "note" in r):
        print(f"warning: {note}", file=sys.stderr, flush=True)
    return [r for r in lines if step.record_name in r]


WORKER_LOG = "worker.log"  # the warm worker's own output, outside any job
CLOSE_S = 10.0  # a warm worker's time to stop its kernel once told to end


class WarmWorker:
    """One `python -m kit.batch.worker --serve` child and its warm kernel, for the tasks that run
    warm: each job is timed, stopped and interrupted as a one-shot child is (`_wait`). At a
    timeout, a stop, an interrupt, or when it exits without replying, its whole tree is killed
    and it is forgotten: the next warm task starts a fresh one."""

    def __init__(self, outputs: Path, env: dict | None = None) -> None:
        self.outputs, self.env = outputs, env
        self.proc: subprocess.Popen | None = None
        self.folder: tempfile.TemporaryDirectory | None = None  # its logs and replies
        self.sent = 0

    def run(
        self, spec: dict, timeout_s: float, should_stop: Callable[[], bool] | None = None
    ) -> Outcome:
        """Execute one notebook spec in the warm kernel; the Outcome a one-shot child would give,
        with a note that it ran warm."""
        started = time.perf_counter()
        proc, folder = self._started()
        self.sent += 1
        log, reply = folder / f"{self.sent}.log", folder / f"{self.sent}.reply"
        try:
            self._send(proc, {**spec, "log": str(log), "reply": str(reply)})
            ended = _wait(proc, started + timeout_s, should_stop, reply.exists)
        except BaseException:
            self.kill()
            raise
        seconds = time.perf_counter() - started
        if ended == REPLIED:
            return _warm_outcome(json.loads(reply.read_text()), _read_lines(log), seconds)
        lines = _read_lines(log) or _read_lines(folder / WORKER_LOG)
        self.kill()
        if not isinstance(ended, tuple):
            stopped = _stopped(ended, timeout_s, seconds)
            stopped.note = f"in the warm worker (its job {self.sent}), killed with its kernel"
            return stopped
        code, peak = ended
        if code == 0:  # it ended (its input closed?) before this job did
            return _outcome(EXIT_FAILED, peak, [*lines, NO_REPLY], seconds)
        return _outcome(code, peak, lines, seconds)

    def _started(self) -> tuple[subprocess.Popen, Path]:
        if self.proc is None or self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix="kit-warm-")
            with open(Path(self.folder.name) / WORKER_LOG, "ab") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "kit.batch.worker", "--serve"],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=_child_env(self.outputs, self.env),
                )
            self.sent = 0
        return self.proc, Path(self.folder.name)

    @staticmethod
    def _send(proc: subprocess.Popen, spec: dict) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:  # it is gone: _wait reaps it and says how it ended
            pass

    def kill(self) -> None:
        """Kill the worker's whole tree, kernel included, and forget it."""
        if self.proc is not None:
            _kill(self.proc)
        self._forget()

    def close(self) -> None:
        """End the worker: its input closed, it stops its kernel and exits; killed past
        CLOSE_S."""
        if self.proc is not None and self.proc.returncode is None:
            self._close_input()
            try:
                self.proc.wait(CLOSE_S)
            except subprocess.TimeoutExpired:
                _kill(self.proc)
        self._forget()

    def _close_input(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def _forget(self) -> None:
        self._close_input()
        if self.folder is not None:
            self.folder.cleanup()
        self.proc, self.folder = None, None


NO_REPLY = "the warm worker exited without replying"
WARM_NOTE = "in the warm kernel (its job {})"  # a job record's note: the kernel's n-th job


def warm_job(note: str) -> int | None:
    """From a job record's note: its place among its warm kernel's jobs (1: the one that started
    the kernel), None where it ran in a kernel of its own."""
    found = re.search(re.escape(WARM_NOTE).replace(r"\{\}", r"(\d+)"), note)
    return int(found.group(1)) if found else None


def _read_lines(path: Path) -> list[str]:
    try:
        return _lines(path.read_bytes())
    except FileNotFoundError:
        return []


def _warm_outcome(reply: dict, lines: list[str], seconds: float) -> Outcome:
    """A warm worker's reply as the Outcome of a one-shot child that ended with its code, noted."""
    outcome = _outcome(int(reply["code"]), Peak(None, None), lines, seconds)
    job = reply.get("job")
    outcome.note = WARM_NOTE.format(job) if job else "in the warm worker"
    if reply.get("peak_reset") is False:
        outcome.note += "; peak memory since that kernel started (VmHWM not resettable here)"
    return outcome


class LocalExecutor:
    """Runs tasks one after another on this machine: each in a child of its own, or, for the
    tasks `warm` (kit.batch.jobs.runs_warm: auto, on, off) says, in one WarmWorker."""

    def __init__(self, warm: str = "off") -> None:
        check_warm_mode(warm)
        self.warm = warm
        self._current: Task | None = None
        self._warm: WarmWorker | None = None

    def prepare(self, tasks: list[Task]) -> list[Prepared]:
        """The exports, then the compiles ahead (which load the exports)."""
        return [prepare_exports(tasks), prepare_compiles(tasks)]

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            self._current = task
            task.started = time.perf_counter()
            outcome = self._run(task)
            self._current = None
            yield task, outcome
        self._close_warm()  # its kernel's memory (a CUDA context) back before the next phase

    def _run(self, task: Task) -> Outcome:
        if not runs_warm(task.job, self.warm):
            self._close_warm()  # nothing of the last warm row beside this notebook (its memory)
            return run_notebook(task.spec(), task.job.timeout_s, task.out)
        if self._warm is not None and self._warm.outputs != task.out:
            self._close_warm()
        if self._warm is None:
            self._warm = WarmWorker(task.out)
        return self._warm.run(task.spec(), task.job.timeout_s)

    def in_flight(self) -> list[Task]:
        return [self._current] if self._current else []

    def stop(self) -> None:
        self._current = None  # run_notebook killed its child when the interrupt passed through
        if self._warm is not None:
            self._warm.kill()
            self._warm = None

    def close(self) -> None:
        self._close_warm()

    def _close_warm(self) -> None:
        if self._warm is not None:
            self._warm.close()
            self._warm = None
