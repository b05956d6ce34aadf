"""One batch at a time per outputs/ folder: an exclusive lock, and who holds it."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from kit import atomic
from kit.errors import KitError

LOCK_FILE = ".reproduce.lock"
OWNER_FILE = ".reproduce.owner.json"  # separate: acquiring the lock truncates LOCK_FILE


class OutputsBusy(KitError):
    """Another `kit reproduce` holds the outputs/ lock."""


@contextlib.contextmanager
def outputs_lock(out: Path, command: str = "kit reproduce") -> Iterator[None]:
    """Hold the exclusive lock on `out` for the block, or raise OutputsBusy at once."""
    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / LOCK_FILE, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise OutputsBusy(
            f"another {_owner(out)} is using {out}/; wait for it to finish "
            f"(or stop it) and run again"
        ) from None
    try:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": dt.datetime.now().isoformat(timespec="seconds"),
        }
        atomic.write_text(out / OWNER_FILE, json.dumps(owner))
        yield
    finally:
        (out / OWNER_FILE).unlink(missing_ok=True)
        lock.release()


def _owner(out: Path) -> str:
    """'`kit reproduce` (pid N, started T)' from the owner file, as far as it can be read."""
    try:
        owner = json.loads((out / OWNER_FILE).read_text())
        return f"`{owner['command']}` (pid {owner['pid']}, started {owner['started']})"
    except (OSError, ValueError, KeyError):
        return "`kit reproduce` (pid unknown: it is just starting)"
