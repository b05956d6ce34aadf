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
from enum import StrEnum

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


class TargetVerdict(StrEnum):
    """What a ratio's 95 % interval says of its target (printed and written as its string)."""

    MET = "met"
    MISSED = "MISSED"
    INCONCLUSIVE = "inconclusive"


def target_verdict(low: float | None, high: float | None, target: float) -> TargetVerdict:
    """MET when the whole 95 % interval [low, high] is at or above `target`, MISSED when all of it
    is below, else INCONCLUSIVE: it straddles the target, or there is none (low or high None).

    >>> [str(target_verdict(lo, hi, 0.95)) for lo, hi in [(0.95, 1.1), (0.8, 0.94), (0.9, 1.1)]]
    ['met', 'MISSED', 'inconclusive']
    >>> str(target_verdict(None, None, 0.95))
    'inconclusive'
    """
    if low is None or high is None:
        return TargetVerdict.INCONCLUSIVE
    if low >= target:
        return TargetVerdict.MET
    return TargetVerdict.MISSED if high < target else TargetVerdict.INCONCLUSIVE


def ratio_verdict(
    numerators: list[float], denominators: list[float], target: float
) -> tuple[object, str]:
    """(interval of sum(numerators) / sum(denominators), verdict) from paired rounds: the interval's
    `target_verdict`, with the reason where there is no interval."""
    from kit.measure.stats import ratio_interval

    iv = ratio_interval(
        numerators, denominators, method="paired rounds, ratio estimator, t interval"
    )
    if not iv.available:
        return iv, f"{TargetVerdict.INCONCLUSIVE} ({iv.reason})"
    return iv, target_verdict(iv.low, iv.high, target)


def ratio_text(iv, verdict: str, target: float) -> str:
    """'0.987 (95 % CI 0.951-1.023; target >= 0.98: inconclusive)'."""
    ci = f"95 % CI {iv.low:.3f}-{iv.high:.3f}" if iv.available else "no interval"
    return f"{iv.value:.3f} ({ci}; target >= {target:g}: {verdict})"
