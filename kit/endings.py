"""How to end what a killed client leaves running: a worker that `docker exec` started in a
container outlives its killed client (the exec'd process is the container's, not the client's
child), and would keep the IPU from the next job. Whoever starts such a worker registers, under its
client's pid, the command that ends it; whoever kills a process tree (kit.batch.proctree, at a job's
time limit or on Ctrl-C) runs the registered commands of the tree's processes first.

One JSON file per client in `endings_dir()` (KIT_ENDINGS_DIR, default a per-user folder in the
temporary directory): {"pid", "started" (the client's start time, so that a reused pid never runs
another's command), "argv"}.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import psutil

from kit.atomic import write_text

ENV = "KIT_ENDINGS_DIR"
GRACE_S = 3.0  # the batch's SIGTERM -> SIGKILL grace; a worker's own ending waits less than this
# one registered command (`docker exec <container> python3 -c "os.kill(...)"`)
ENDING_TIMEOUT_S = 10.0


def endings_dir() -> Path:
    return Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / f"kit-endings-{os.getuid()}")


def _file(pid: int) -> Path:
    return endings_dir() / f"{pid}.json"


def register(client_pid: int, argv: list[str]) -> Path:
    """Record `argv` as the way to end what the process `client_pid` started.

    >>> import os; path = register(os.getpid(), ["true"]); forget(os.getpid()); path.exists()
    False
    """
    started = psutil.Process(client_pid).create_time()
    _prune()
    return write_text(
        _file(client_pid), json.dumps({"pid": client_pid, "started": started, "argv": list(argv)})
    )


def _prune() -> None:
    """Drop the files of clients long gone (a kernel killed outside the batch leaves its file)."""
    for path in endings_dir().glob("*.json"):
        if path.stem.isdigit() and not psutil.pid_exists(int(path.stem)):
            path.unlink(missing_ok=True)


def forget(client_pid: int) -> None:
    _file(client_pid).unlink(missing_ok=True)


def run_endings(pids: Iterable[int], timeout_s: float = ENDING_TIMEOUT_S) -> list[int]:
    """Run the registered command of each of `pids` still alive as the process that registered it
    (a reused pid's stale file is only removed); the pids whose command ran."""
    ran = []
    for pid in pids:
        entry = _read(pid)
        if entry is None:
            continue
        forget(pid)
        try:
            same = psutil.Process(pid).create_time() == entry["started"]
        except psutil.NoSuchProcess:
            same = False
        if same:
            try:
                subprocess.run(entry["argv"], capture_output=True, timeout=timeout_s)
                ran.append(pid)
            except (OSError, subprocess.TimeoutExpired):
                pass
    return ran


def _read(pid: int) -> dict | None:
    try:
        entry = json.loads(_file(pid).read_text())
        return entry if isinstance(entry.get("argv"), list) else None
    except (OSError, ValueError, AttributeError):
        return None
