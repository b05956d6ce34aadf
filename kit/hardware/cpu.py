"""The CPUs this process may run on, and the thread settings it runs with."""

from __future__ import annotations

import os

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_WAIT_POLICY",
)


def our_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def thread_settings() -> dict:
    """Threads the run could use: usable cores and the thread variables set in the environment."""
    return {
        "usable_cores": len(our_cpus()),
        **{k: os.environ[k] for k in THREAD_ENV if k in os.environ},
    }
