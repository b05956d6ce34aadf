"""Helpers shared by the benchmarks: env-var knobs, interleaved timing rounds and the bare-loop peer
arm (`LoopArm`, the base of benchmarks/peer_arms.py's and peer_gpu_arms.py's peers).

Importing it fixes glibc malloc's thresholds as every study does
(kit.measure.memory.steady_allocator), so a benchmark's figures do not depend on what ran before
them in its process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np

from kit.measure.memory import steady_allocator

ALLOCATOR = steady_allocator()


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


def small_models() -> bool:
    """BENCH_SMALL=1: the zoo's small variants (`run_all --smoke`: each benchmark runs end to end,
    its figures mean nothing)."""
    return os.environ.get("BENCH_SMALL", "0") == "1"


class LoopArm:
    """A peer timed by a bare loop of its own call (what a user's script does)."""

    call = None
    batch = 1

    def outputs(self) -> list[np.ndarray]:
        return [np.asarray(o) for o in self.call()]

    def round(self, seconds: float) -> dict:
        n, elapsed = bare_loop(self.call, seconds)
        return {"throughput": n * self.batch / elapsed, "calls": n}


def strict() -> bool:
    """BENCH_STRICT=1 turns a missed target into a failing exit status."""
    return os.environ.get("BENCH_STRICT", "0") == "1"


def load_note() -> str:
    """The 1-minute load average against the cores: shared machines make absolute figures noisy."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def ratio_verdict(
    numerators: list[float], denominators: list[float], target: float
) -> tuple[object, str]:
    """(interval of sum(numerators) / sum(denominators), verdict) from paired rounds: 'met' when the
    whole 95 % interval is at or above `target`, 'missed' when it is all below, else
    'inconclusive'."""
    from kit.measure.stats import ratio_interval

    iv = ratio_interval(
        numerators, denominators, method="paired rounds, ratio estimator, t interval"
    )
    if not iv.available:
        return iv, f"inconclusive ({iv.reason})"
    return iv, "met" if iv.low >= target else "MISSED" if iv.high < target else "inconclusive"


def ratio_text(iv, verdict: str, target: float) -> str:
    """'0.987 (95 % CI 0.951-1.023; target >= 0.98: inconclusive)'."""
    ci = f"95 % CI {iv.low:.3f}-{iv.high:.3f}" if iv.available else "no interval"
    return f"{iv.value:.3f} ({ci}; target >= {target:g}: {verdict})"
