"""Graphcore IPUs through PopRT (floor 5, kit.backends).

`backend` (IpuBackend, IpuSession) drives one PopRT worker process per session
(`worker_process`); `settings` turns ByteMLPerf's per-model settings into PopRT's options, `graph`
checks them against the kit's exported graph, `pack` holds pack mode's QPS and its check.
`poprt_worker/` is the worker itself: Python 3.8, run apart from the kit, importing none of it.
"""

from __future__ import annotations

from kit.backends.ipu.backend import EMULATED_LABEL, EMULATED_NOTE, IpuBackend, IpuSession
from kit.backends.ipu.worker_process import UNAVAILABLE, IpuWorker, IpuWorkerError

__all__ = [
    "EMULATED_LABEL",
    "EMULATED_NOTE",
    "UNAVAILABLE",
    "IpuBackend",
    "IpuSession",
    "IpuWorker",
    "IpuWorkerError",
]
