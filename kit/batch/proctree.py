"""Stop a notebook's whole process tree: the papermill child, its kernel and what they started.

A Jupyter kernel runs in a session (process group) of its own, so killing the child's group
alone leaves the kernel running; every process group in the tree is signalled. What a process of
the tree started where no signal reaches it (a PopRT worker behind `docker exec`) is ended first, by
the command its client registered (kit.endings).
"""

from __future__ import annotations

import os
import signal

import psutil

from kit.endings import GRACE_S, run_endings


def tree(pid: int) -> list[psutil.Process]:
    """`pid` and all its descendants still alive."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int, grace_s: float = GRACE_S) -> list[int]:
    """Run the registered endings of the processes under `pid` (kit.endings), SIGTERM every process
    and process group under it, then SIGKILL what is left; returns the pids it found (whose
    leftovers the caller may then clean up)."""
    procs = tree(pid)
    run_endings(p.pid for p in procs)
    own_group = os.getpgid(0)
    groups = set()
    for proc in procs:
        try:
            groups.add(os.getpgid(proc.pid))
        except ProcessLookupError:
            pass
    groups.discard(own_group)
    _signal_all(procs, groups, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    # processes started meanwhile in the same groups are caught by killpg
    _signal_all(alive, groups, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=grace_s)
    return [proc.pid for proc in procs]


def _signal_all(procs: list[psutil.Process], groups: set[int], sig: int) -> None:
    for group in groups:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
