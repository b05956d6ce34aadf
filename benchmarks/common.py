"""Helpers shared by the benchmarks: env-var knobs and interleaved timing rounds."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


def bare_loop(call: Callable[[], object], seconds: float) -> tuple[int, float]:
    """Call until `seconds` have passed: (calls, elapsed seconds); no per-call bookkeeping."""
    clock = time.perf_counter
    n, start = 0, clock()
    while True:
        call()
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return n, elapsed


def strict() -> bool:
    """BENCH_STRICT=1 turns a missed target into a failing exit status."""
    return os.environ.get("BENCH_STRICT", "0") == "1"


def load_note() -> str:
    """The 1-minute load average against the cores: shared machines make absolute figures noisy."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
