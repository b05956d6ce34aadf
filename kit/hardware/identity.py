"""The exact hardware part behind a kind on this machine, for deciding what may be reused.

A kind ('cpu', 'cuda', 'ipu') says too little: a figure measured on a C600 must not be reused on
an M2000 host, nor a CPU figure on another CPU model. The part is read cheaply, without a
backend: the CPU model, the visible GPUs' names, the IPU board type and architecture (`gc-info`).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import uuid
from pathlib import Path

from kit.errors import InvalidParameter
from kit.hardware import cuda, kinds
from kit.hardware.cpu import our_cpus, thread_settings
from kit.hardware.environment import cpu_model

IPU_FIELDS = ("board type", "ipu architecture")
UNKNOWN_IPU = "IPU part unknown"


def hardware_part(kind: str) -> str:
    """'Intel(R) Xeon(R) ...' for 'cpu', 'NVIDIA H100 ...' for 'cuda', 'board type: C600, ipu
    architecture: ipu21' for 'ipu' (or a note saying why the part could not be read)."""
    if kind == "cpu":
        return cpu_model()
    if kind == "cuda":
        return ", ".join(cuda.visible_gpu_names()) or "no GPU visible"
    if kind == "ipu":
        return ipu_part()
    raise InvalidParameter("hardware", kind, f"one of {', '.join(kinds.KINDS)}")


def ipu_part() -> str:
    """The first IPU's board type and architecture from `gc-info -d 0 -i`."""
    if not shutil.which("gc-info"):
        return f"{UNKNOWN_IPU} (no gc-info on PATH)"
    try:
        out = subprocess.run(["gc-info", "-d", "0", "-i"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{UNKNOWN_IPU} (gc-info: {type(exc).__name__})"
    found = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip().lower() in IPU_FIELDS:
            found[key.strip().lower()] = value.strip()
    return ", ".join(f"{k}: {found[k]}" for k in IPU_FIELDS if k in found) or f"{UNKNOWN_IPU} (gc-info said none)"


#: Where Linux lists the CPU's instruction-set flags (a test points it elsewhere).
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags() -> str:
    """A short digest of the CPU's instruction-set flags (avx512_bf16, amx...), which decide the
    kernels a backend picks; 'unknown' where the OS does not list them."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return "unknown"
    flags = sorted({f for line in text.splitlines() if line.startswith(("flags", "Features"))
                    for f in line.partition(":")[2].split()})
    return hashlib.sha256(" ".join(flags).encode()).hexdigest()[:12] if flags else "unknown"


def reuse_identity(kind: str) -> str:
    """Everything of this machine a figure on `kind` depends on, for the reuse fingerprint: the
    part, the cores this process may use (taskset, cgroups), the CPU's flags and the thread
    settings. An IPU part gc-info cannot name never matches another run's: no reuse rather than
    a C600 figure reused on an M2000.

    >>> reuse_identity("cpu") == reuse_identity("cpu")
    True
    """
    part = hardware_part(kind)
    if part.startswith(UNKNOWN_IPU):
        part += f" [never reused: {uuid.uuid4().hex[:12]}]"
    settings = thread_settings()
    cores = ",".join(map(str, our_cpus()))
    threads = ",".join(f"{k}={v}" for k, v in sorted(settings.items()) if k != "usable_cores")
    return f"{part} | cores {cores} | cpu flags {cpu_flags()} | threads {threads or 'default'}"
