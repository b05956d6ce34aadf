"""How benchmarks/gpu_check.py runs one check: a subprocess in its own process group, bounded by the
seconds left, its whole output in a file beside the log and the tail of it appended to the log.

A `Runner` is any callable `(argv, env, limit_s, log, full) -> Completed`; the tests pass a fake
one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 40
GRACE_S = 15.0  # after SIGINT at the limit, before SIGKILL
KILL_WAIT_S = 5.0  # after SIGKILL, for the process to be reaped
#: the most a child can run past its limit while it is stopped: its limit is this much shorter
STOP_S = GRACE_S + KILL_WAIT_S


@dataclass(frozen=True)
class Completed:
    returncode: int
    seconds: float
    timed_out: bool = False


Runner = Callable[[list[str], dict, float, Path, Path], Completed]


def run_process(argv: list[str], env: dict, limit_s: float, log: Path, full: Path) -> Completed:
    """Run `argv` for at most `limit_s` seconds (then SIGINT to its group, SIGKILL after a grace),
    its output into `full` and the tail of it appended to `log`; a SIGINT to this process stops the
    child the same way before it is raised again."""
    for path in (log, full):
        path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(full, "w") as sink:
        proc = subprocess.Popen(
            argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode, timed_out = wait(proc, limit_s), False
        except subprocess.TimeoutExpired:
            returncode, timed_out = stop(proc), True
        except KeyboardInterrupt:
            stop(proc)
            raise
        finally:
            append_tail(log, argv, full, time.monotonic() - started)
    return Completed(returncode, time.monotonic() - started, timed_out)


def wait(proc: subprocess.Popen, limit_s: float) -> int:
    return proc.wait(timeout=max(limit_s, 0.0))


def stop(proc: subprocess.Popen) -> int:
    """SIGINT to the child's process group (papermill kernels included), SIGKILL after GRACE_S."""
    for sig, grace in ((signal.SIGINT, GRACE_S), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def append_tail(log: Path, argv: list[str], full: Path, seconds: float) -> None:
    lines = full.read_text(errors="replace").splitlines() if full.exists() else []
    with open(log, "a") as f:
        f.write(
            f"\n$ {' '.join(argv)}   ({seconds:.0f} s; last {TAIL_LINES} of {len(lines)} lines)\n"
        )
        f.write("\n".join(lines[-TAIL_LINES:]) + "\n")
