"""What of this machine a figure depends on, for deciding what may be reused: the kind's exact part
(kit.hardware.kinds) and, beyond it, the cores the process may use, the CPU's flags and the thread
settings. A figure measured on 2 cores is not reused under `taskset -c 0`, nor one measured on a
C600 on an M2000 host."""

from __future__ import annotations

import hashlib
import uuid

from kit.hardware import kinds
from kit.hardware.cpu import cpuinfo_flags, our_cpus, thread_settings
from kit.hardware.ipu import UNKNOWN_IPU


def cpu_flags_digest() -> str:
    """A short digest of the CPU's instruction-set flags (avx512_bf16, amx...), which decide the
    kernels a backend picks; 'unknown' where the OS does not list them."""
    flags = sorted(cpuinfo_flags())
    return hashlib.sha256(" ".join(flags).encode()).hexdigest()[:12] if flags else "unknown"


def reuse_identity(kind: str) -> str:
    """Everything of this machine a figure on `kind` depends on, for the reuse fingerprint: the
    part, the cores this process may use (taskset, cgroups), the CPU's flags and the thread
    settings. An IPU part gc-info cannot name never matches another run's: no reuse rather than
    a C600 figure reused on an M2000.

    >>> reuse_identity("cpu") == reuse_identity("cpu")
    True
    """
    part = kinds.part(kind)
    if part.startswith(UNKNOWN_IPU):
        part += f" [never reused: {uuid.uuid4().hex[:12]}]"
    cores = ",".join(map(str, our_cpus()))
    threads = ",".join(
        f"{k}={v}" for k, v in sorted(thread_settings().items()) if k != "usable_cores"
    )
    flags = cpu_flags_digest()
    return f"{part} | cores {cores} | cpu flags {flags} | threads {threads or 'default'}"
