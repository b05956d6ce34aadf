"""Graphcore IPUs on this machine, read without a backend: whether one is present (a /dev/ipu node
or `gc-info` on PATH) and its part (board type and architecture, from `gc-info`)."""

from __future__ import annotations

import os
import shutil
import subprocess

IPU_FIELDS = ("board type", "ipu architecture")
#: the interpreter (or command) the PopRT worker runs under (kit.backends.ipu.worker_process)
PYTHON_ENV = "KIT_IPU_PYTHON"
UNKNOWN_IPU = "IPU part unknown"


def ipu_present() -> bool:
    return any(os.path.exists(f"/dev/ipu{i}") for i in range(16)) or bool(shutil.which("gc-info"))


def missing_reason() -> str | None:
    """Why a run on the IPU cannot start here, None where it can: an IPU is present, or
    KIT_IPU_PYTHON names the interpreter PopRT runs under (a container's, or the PopRT test
    double's, whose figures are labelled "not run on an IPU")."""
    if ipu_present() or os.environ.get(PYTHON_ENV, "").strip():
        return None
    return (
        "no IPU here (no /dev/ipu* node, no gc-info on PATH) and no PopRT interpreter named "
        f"({PYTHON_ENV} unset; docs/ipu.md)"
    )


def ipu_part() -> str:
    """The first IPU's board type and architecture from `gc-info -d 0 -i`."""
    if not shutil.which("gc-info"):
        return f"{UNKNOWN_IPU} (no gc-info on PATH)"
    try:
        out = subprocess.run(
            ["gc-info", "-d", "0", "-i"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{UNKNOWN_IPU} (gc-info: {type(exc).__name__})"
    found = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip().lower() in IPU_FIELDS:
            found[key.strip().lower()] = value.strip()
    return (
        ", ".join(f"{k}: {found[k]}" for k in IPU_FIELDS if k in found)
        or f"{UNKNOWN_IPU} (gc-info said none)"
    )
