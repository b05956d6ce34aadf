"""Hand-made results of runs on a real Graphcore C600 (not the PopRT double), for the scorecard's
tests."""

from __future__ import annotations

from kit.measure.window import BatchMeasurement
from kit.results import ResultKind, RunResult

MS = 1_000_000


def calls_of(durations_ms: list[float], start_ns: int = 0) -> list[tuple[int, int]]:
    """Back-to-back calls with these durations."""
    out, t = [], start_ns
    for d in durations_ms:
        out.append((t, t + int(d * MS)))
        t += int(d * MS)
    return out


def c600_result(
    model: str,
    precision: str,
    measurements: list[BatchMeasurement],
    *,
    poprt="1.4.0",
    session: dict | None = None,
    ipu_precision: str | None = None,
) -> RunResult:
    """A result as a real (not emulated) run on a C600 would write it."""
    result = RunResult.new(
        ResultKind.MODEL_BENCHMARK, model, {"model": model, "published_precision": precision}, {}
    )
    ipu_precision = ipu_precision or {"FP16": "fp16", "FP8": "fp8"}[precision]
    result.backend = {
        "name": "ipu",
        "precision": ipu_precision,
        "device": "ipu",
        "device_info": {"kind": "ipu", "name": "Graphcore C600", "part": "c600"},
        "session": {
            "emulated": False,
            "poprt_version": poprt,
            "comparable": True,
            **(session or {}),
        },
    }
    result.measurements = [m.record() for m in measurements]
    return result


def measured(batch: int, clients: int, qps: float, n: int = 60) -> BatchMeasurement:
    """`clients` threads of `n` equal calls giving `qps` samples/s in all."""
    per_call_ms = clients * batch / qps * 1000
    threads = [calls_of([per_call_ms] * n) for _ in range(clients)]
    return BatchMeasurement(
        batch_size=batch,
        mode="clients" if clients > 1 else "single",
        threads=clients,
        calls=threads,
    )
