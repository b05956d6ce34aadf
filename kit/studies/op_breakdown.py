"""Where a call's time goes, by operator class: why a compute-bound figure sits below its peak.

A figure's fraction of the peak is the product of two measurable factors:

    achieved / peak = (matrix-operator time share) x (matrix-operator rate / peak)

The FLOPs the roofline counts (kit.models.flops) are those of Conv, MatMul and Gemm, which a
backend runs as matrix operators (GEMMs, convolutions, fused attention). Everything else (layer
norm, softmax, GELU, adds, reshapes and copies) takes time and does no counted FLOPs. So a row at
38 % of its peak may be GEMMs at 70 % of the peak for 55 % of the time: the breakdown says which
factor holds it back.

Measured with torch.profiler over a few calls after the timed window (never inside it), from each
operator's self time. The profiler adds a little time per operator, so small operators' shares
are slight overestimates; the method string says so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator

PROFILED_CALLS = 2  # the session was just timed, so it is warm: no extra call first
#: torch operator names whose self time is matrix arithmetic (the FLOPs the graph counts)
MATRIX_MARKERS = ("mm", "matmul", "linear", "conv", "attention", "gemm", "mkldnn_rnn", "_sdpa")
METHOD = (
    "torch.profiler self CPU time over the profiled calls (profiled_calls: 2, 1 where a call lasts "
    "seconds) after the timed window, as shares of the calls' wall time (time outside any operator "
    "counted as other); matrix operators: names containing "
    + ", ".join(MATRIX_MARKERS)
    + " (profiler overhead slightly inflates the share of "
    "many small operators); fractions are of the nominal peak, which boost clocks can exceed"
)


def is_matrix_op(name: str) -> bool:
    name = name.lower()
    return any(marker in name for marker in MATRIX_MARKERS)


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """The profiler's C++ side prints start/stop lines (USDT ...) to the process's stdout and
    stderr, where a notebook would show them; nothing else writes while the profiled calls run."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in (1, 2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            os.dup2(null, fd)
        yield
    finally:
        for fd, old in zip((1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(null)


def breakdown(
    self_times_us: dict[str, float],
    flops_per_call: float,
    peak_gflops: float,
    calls: int = PROFILED_CALLS,
) -> dict:
    """The two factors from per-operator self times (microseconds, summed over `calls` calls)."""
    total = sum(self_times_us.values())
    matrix = sum(t for name, t in self_times_us.items() if is_matrix_op(name))
    if total <= 0 or matrix <= 0:
        raise ValueError("the profile recorded no operator time")
    matrix_rate = flops_per_call * calls / (matrix * 1e-6) / 1e9
    top = sorted(self_times_us.items(), key=lambda kv: kv[1], reverse=True)[:6]
    return {
        "matrix_time_share": matrix / total,
        "matrix_gflops": matrix_rate,
        "matrix_fraction_of_peak": matrix_rate / peak_gflops,
        "top_ops": [
            {"op": name, "share": t / total, "matrix": is_matrix_op(name)} for name, t in top
        ],
        "method": METHOD,
    }


OUTSIDE_OPS = "(outside torch operators: Python and framework code)"


def profile_torch_session(session, inputs: dict, calls: int = PROFILED_CALLS) -> dict[str, float]:
    """Self CPU time per torch operator (microseconds) over `calls` runs of a kit torch session,
    plus the calls' wall time no operator accounts for (OUTSIDE_OPS), so the shares are of wall
    time."""
    from torch.profiler import ProfilerActivity, profile

    with native_output_silenced(), profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for _ in range(calls):
            session.run(inputs)
        wall_us = (time.perf_counter() - started) * 1e6
    times: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        times[event.key] += event.self_cpu_time_total
    times[OUTSIDE_OPS] = max(0.0, wall_us - sum(times.values()))
    return dict(times)


def reason(row: dict) -> str:
    """One sentence on what holds a figure below its peak, from its breakdown."""
    share, eff = row["matrix_time_share"], row["matrix_fraction_of_peak"]
    others = [o["op"] for o in row["top_ops"] if not o["matrix"]][:3]
    held = "the other operators" if share < eff else "the matrix operators' own rate"
    return (
        f"matrix operators run at {eff:.0%} of the peak for {share:.0%} of the time "
        f"({eff:.0%} x {share:.0%} = {eff * share:.0%} of the peak); mostly held back by {held}"
        + (f" (largest others: {', '.join(others)})" if others else "")
    )
