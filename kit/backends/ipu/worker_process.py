"""The kit's side of the PopRT worker: its process (started under KIT_IPU_PYTHON, default
`python3`; `docker exec -i <container> python3` works when the kit's paths are mounted at the same
place in the container), framed requests and replies over its pipes, its stderr, its memory while it
loads, and its end."""

from __future__ import annotations

import collections
import os
import select
import shlex
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kit import endings
from kit.backends.ipu.poprt_worker.wire import read_message, write_message
from kit.errors import BackendUnavailable, KitError
from kit.hardware.ipu import PYTHON_ENV
from kit.measure.memory import GB, SKIP_CHECK_ENV, InsufficientMemory, oom_message, parse_meminfo

WORKER = Path(__file__).with_name("poprt_worker")
UNAVAILABLE = "IPU backend unavailable: PopRT not installed (needs the Poplar SDK; see README)"
PASS_ENV = ("GCDA_MONITOR",)  # what must reach a worker even through `docker exec`
STDERR_LINES = 40
WATCH_S = 0.5  # how often the worker's peak RSS is read while it converts and compiles
# for the worker to go once its pipes close: well inside the batch's grace (endings.GRACE_S)
CLOSE_WAIT_S = 1.0
MEMORY_ERROR = "StepWontFit: "  # the worker's reply for a step its known need does not fit


class IpuWorkerError(KitError):
    """The PopRT worker failed (compile, load, run, timeout or died); the message says why."""


def interpreter(env: Mapping[str, str] | None = None) -> list[str]:
    return shlex.split((os.environ if env is None else env).get(PYTHON_ENV, "python3"))


def request_timeout_s(kind: str = "run") -> float:
    """Seconds a request may take: KIT_IPU_LOAD_TIMEOUT_S for load (compiling can take long),
    KIT_IPU_TIMEOUT_S for the rest (a measure request adds its own max duration)."""
    name, default = {"load": ("KIT_IPU_LOAD_TIMEOUT_S", "7200")}.get(
        kind, ("KIT_IPU_TIMEOUT_S", "600")
    )
    return float(os.environ.get(name, default))


def worker_command(env: Mapping[str, str] | None = None) -> list[str]:
    """The worker's argv; through `docker exec` the variables in PASS_ENV are passed with -e (an
    exec'd process does not inherit the caller's environment) and stdin is kept open (-i)."""
    env = os.environ if env is None else env
    cmd = interpreter(env)
    if cmd[:2] == ["docker", "exec"]:
        flags = [] if ("-i" in cmd or "--interactive" in cmd) else ["-i"]
        for name in PASS_ENV:
            if name in env:
                flags += ["-e", f"{name}={env[name]}"]
        cmd = cmd[:2] + flags + cmd[2:]
    return [*cmd, str(WORKER), "--serve"]


class IpuWorker:
    """One worker process: framed requests on its stdin, replies on its stdout, stderr kept."""

    def __init__(self, env: dict[str, str] | None = None):
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.peak_gb: float | None = None  # the worker's VmHWM, read while it loads (_read_peak)
        self.killed = False  # by SIGKILL, most often the kernel's out-of-memory killer
        try:
            self.proc = subprocess.Popen(
                worker_command(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=env,
            )
        except FileNotFoundError as exc:
            raise BackendUnavailable(UNAVAILABLE) from exc
        self._lock = threading.Lock()
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self._interpreter = interpreter(env)
        # how to end the worker where it runs (`kill`) and whether at once (`now`)
        self._ending: dict = {}
        self._finalizer = weakref.finalize(self, _stop_process, self.proc, self._ending)

    def probe(self) -> dict:
        """The worker's versions and device. Where the worker is not the client's own process
        (`docker exec`), the command that ends it where it runs is kept, and registered under the
        client's pid (kit.endings), so that the batch's kill of the job's process tree (a time
        limit, Ctrl-C) runs it even when this process dies first."""
        env = self.request({"op": "probe"}, request_timeout_s())
        pid = env.get("pid")
        if isinstance(pid, int) and pid != self.proc.pid:
            self._ending["kill"] = [
                *self._interpreter,
                "-c",
                f"import os, signal; os.kill({pid}, signal.SIGKILL)",
            ]
            endings.register(self.proc.pid, self._ending["kill"])
        return env

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None  # opened with PIPE
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(line.decode(errors="replace").rstrip())

    # the worker's reply, as its op defines it
    def request(self, msg: dict, timeout_s: float) -> Any:
        """Send one request and wait for its reply (IpuWorkerError on failure, death or timeout)."""
        with self._lock:
            if self._poll() is not None:
                raise self._died("before the request")
            try:
                write_message(self.proc.stdin, msg)
                ready = self._wait_for_reply(timeout_s, watch_memory=msg.get("op") == "load")
                if not ready:
                    self.kill()
                    raise IpuWorkerError(
                        f"PopRT worker gave no reply to {msg.get('op')!r} within "
                        f"{timeout_s:.0f} s (KIT_IPU_TIMEOUT_S / KIT_IPU_LOAD_TIMEOUT_S); "
                        f"it was stopped.{self._tail()}"
                    )
                reply = read_message(self.proc.stdout)
            except (BrokenPipeError, EOFError, OSError) as exc:
                raise self._died(f"during {msg.get('op')!r} ({type(exc).__name__})") from None
            except KeyboardInterrupt:
                self.kill()  # Ctrl-C: a worker left running would keep the IPU
                raise
        if not reply.get("ok"):
            error = str(reply.get("error"))
            if error.startswith(MEMORY_ERROR):
                raise InsufficientMemory(
                    f"PopRT worker: {error.removeprefix(MEMORY_ERROR)}; free memory, or "
                    f"set {SKIP_CHECK_ENV}=1 to try anyway"
                )
            raise IpuWorkerError(f"PopRT worker: {error}")
        return reply.get("result")

    def _died(self, when: str) -> IpuWorkerError:
        code, peak = self._reap()
        self._drain.join(timeout=1)
        if was_killed(code, docker=interpreter()[:2] == ["docker", "exec"]):
            self.killed = True
            return IpuWorkerError(
                oom_message(f"PopRT worker was killed {when}", peak) + "." + self._tail()
            )
        return IpuWorkerError(f"PopRT worker died {when} (exit code {code}).{self._tail()}")

    def _wait_for_reply(self, timeout_s: float, watch_memory: bool) -> bool:
        """Whether a reply came within `timeout_s`. While the worker converts and compiles
        (`watch_memory`), its peak RSS is read twice a second, so that a worker the kernel kills can
        be reported with the peak it had reached; never during timed requests."""
        stdout = self.proc.stdout
        assert stdout is not None  # opened with PIPE
        if not watch_memory:
            return bool(select.select([stdout], [], [], timeout_s)[0])
        deadline = time.monotonic() + timeout_s
        while True:
            self._read_peak()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if select.select([stdout], [], [], min(left, WATCH_S))[0]:
                return True

    def _read_peak(self) -> None:
        """The worker's VmHWM; not readable through `docker exec`, whose client is not the
        worker."""
        if interpreter()[:2] == ["docker", "exec"]:
            return
        try:
            peak = parse_meminfo(Path(f"/proc/{self.proc.pid}/status").read_text())["VmHWM"] / GB
        except (OSError, KeyError):  # gone, or a zombie (no VmHWM line)
            return
        self.peak_gb = max(self.peak_gb or 0.0, peak)

    def _poll(self) -> int | None:
        """The exit code (negative for a signal) once the worker is gone, else None."""
        if self.proc.returncode is None:
            try:
                pid, status = os.waitpid(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                return self.proc.poll()
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
        return self.proc.returncode

    def _reap(self, timeout_s: float = 5.0) -> tuple[int | None, float | None]:
        """(exit code, the last peak RSS read in GB or None), waiting up to `timeout_s` for the
        end."""
        deadline = time.monotonic() + timeout_s
        while self._poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.proc.returncode, self.peak_gb

    def _tail(self) -> str:
        lines = [line for line in self.stderr_tail if line.strip()][-8:]
        return (
            (" Its stderr ends with: " + " | ".join(lines))
            if lines
            else " It wrote nothing to stderr."
        )

    def close(self) -> None:
        if self._poll() is None:
            try:
                self.request({"op": "close"}, 30)
            except KitError:
                pass
        self._finalizer()

    def kill(self) -> None:
        """End the worker now: first where it runs (a `docker exec` client's death does not reach
        the process it started, which would keep /dev/ipu0), then the client."""
        self._ending["now"] = True
        self._finalizer()

    @property
    def alive(self) -> bool:
        return self._poll() is None


def was_killed(code: int | None, docker: bool) -> bool:
    """SIGKILL: -9 from a direct child; `docker exec` exits 128 + 9 when the process inside is."""
    return code == -signal.SIGKILL or (docker and code == 128 + signal.SIGKILL)


def _stop_process(proc: subprocess.Popen, ending: dict) -> None:
    """Close the pipes and give the worker CLOSE_WAIT_S to go (none when `ending["now"]`), then kill
    it where it runs (`ending["kill"]`) and the client; its registered ending is no longer
    needed."""
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    if not ending.get("now"):
        try:
            proc.wait(timeout=CLOSE_WAIT_S)
            endings.forget(proc.pid)
            return
        except subprocess.TimeoutExpired:
            pass
    if ending.get("kill"):
        try:
            subprocess.run(ending["kill"], capture_output=True, timeout=endings.ENDING_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
    endings.forget(proc.pid)
    proc.kill()
    proc.wait()
