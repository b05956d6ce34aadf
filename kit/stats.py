"""Latency statistics from raw per-call samples (the samples are always kept)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency summary in milliseconds.

    >>> LatencyStats.from_ns([1_000_000, 3_000_000]).mean_ms
    2.0
    """

    count: int
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    p99_bytemlperf_ms: float  # sorted[int(0.99 n)], ByteMLPerf's definition

    @classmethod
    def from_ns(cls, samples_ns: list[int] | np.ndarray) -> LatencyStats:
        ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
        if ms.size == 0:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan)
        ordered = np.sort(ms)
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls(
            count=int(ms.size),
            mean_ms=float(ms.mean()),
            std_ms=float(ms.std()),
            min_ms=float(ordered[0]),
            p50_ms=float(p50),
            p90_ms=float(p90),
            p99_ms=float(p99),
            max_ms=float(ordered[-1]),
            p99_bytemlperf_ms=float(ordered[min(int(0.99 * ms.size), ms.size - 1)]),
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LatencyStats:
        return cls(**d)
