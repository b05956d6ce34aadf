"""The CPUs this process may run on, the physical cores under them, and the thread settings it
runs with."""

from __future__ import annotations

import os
from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")
#: Where Linux describes each logical CPU (a test points it elsewhere).
CPUINFO = Path("/proc/cpuinfo")

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_WAIT_POLICY",
)


def cpuinfo_values(key: str) -> list[str]:
    """The value of every `key : value` line of /proc/cpuinfo, one per logical CPU where the key
    is per CPU; [] where the file is unreadable or lacks the key.

    >>> cpuinfo_values("no such key")
    []
    """
    try:
        text = CPUINFO.read_text()
    except OSError:
        return []
    values = []
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip() == key:
            values.append(value.strip())
    return values


def cpuinfo_flags() -> frozenset[str]:
    """The CPU's instruction-set flags (x86 `flags`, Arm `Features`) over every logical CPU."""
    lines = cpuinfo_values("flags") or cpuinfo_values("Features")
    return frozenset(flag for line in lines for flag in line.split())


def our_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def cpu_list(text: str) -> frozenset[int]:
    """The CPUs a sysfs list names.

    >>> sorted(cpu_list("0-2,8"))
    [0, 1, 2, 8]
    """
    out: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


def physical_cores(cpus: list[int], root: Path = SYS_CPU) -> int:
    """How many physical cores `cpus` run on: SMT siblings (hyper-threads) share one core's vector
    units and count once, grouped by the core's CPU list in sysfs (core_cpus_list, older kernels
    thread_siblings_list). `len(cpus)` where the topology is unreadable (a container without
    /sys)."""
    cores = set()
    for cpu in cpus:
        topology = root / f"cpu{cpu}" / "topology"
        for name in ("core_cpus_list", "thread_siblings_list"):
            try:
                cores.add(cpu_list((topology / name).read_text()))
                break
            except (OSError, ValueError):
                continue
        else:
            return len(cpus)
    return len(cores) or len(cpus)


def thread_settings() -> dict:
    """Threads the run could use: usable cores and the thread variables set in the environment."""
    return {
        "usable_cores": len(our_cpus()),
        **{k: os.environ[k] for k in THREAD_ENV if k in os.environ},
    }
