"""Harness overhead: the kit's measured throughput vs a bare `session.run` loop (target >= 0.98).

resnet50 fp32 on ONNX Runtime CPU at batch 1 and 8: one session, the same inputs and threads,
in alternating rounds (kit first in even rounds, bare first in odd ones) so drift hits both.
The kit's call uses IO binding (inputs staged once); the bare loop calls `session.run` as a
user would, and a second bare loop calls the kit's own bound call, which isolates the timing
loop's cost from IO binding's gain. Each ratio comes with its 95 % interval over the paired rounds:
met (all of it >= target), missed (all below) or inconclusive. Knobs: BENCH_ROUNDS (default 8),
BENCH_SECONDS per side per round (default 2).
"""

from __future__ import annotations

import statistics
import sys

from benchmarks.common import (
    bare_loop,
    env_float,
    env_int,
    load_note,
    ratio_text,
    ratio_verdict,
    small_models,
    strict,
)
from kit.backends import BackendConfig, require_backend
from kit.measure.window import MeasureConfig
from kit.models import export_model

TARGET = 0.98
BATCH_SIZES = (1, 8)


def compare(session, inputs: dict, batch_size: int, rounds: int, seconds: float) -> dict:
    """Median throughputs of the kit's measure(), a bare session.run loop and a bare bound-call
    loop."""
    ort_session, names = session.session, session.output_names
    cfg = MeasureConfig(warmup=2, min_duration_s=seconds, min_count=3)
    bound = session.bind(inputs)
    sides = {"kit": [], "bare": [], "bare_bound": []}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in order:
            if side == "kit":
                sides[side].append(session.measure(inputs, batch_size, cfg).throughput)
                continue
            call = bound if side == "bare_bound" else (lambda: ort_session.run(names, inputs))
            call()
            call()  # the same warm-up as the kit gets
            n, elapsed = bare_loop(call, seconds)
            sides[side].append(n * batch_size / elapsed)
    out: dict = {side: statistics.median(v) for side, v in sides.items()}
    for bare in ("bare", "bare_bound"):
        out[f"ratio_{bare}"] = ratio_verdict(sides["kit"], sides[bare], TARGET)
    return out


def main() -> int:
    rounds, seconds = env_int("BENCH_ROUNDS", 8), env_float("BENCH_SECONDS", 2.0)
    model = export_model("resnet50-torch-fp32", small=small_models())
    backend = require_backend("onnxruntime")
    missed = False
    print(
        f"resnet50 fp32, onnxruntime CPU; {rounds} alternating rounds of {seconds:g} s per side "
        f"({load_note()})"
    )
    for bs in BATCH_SIZES:
        session = backend.load(model, BackendConfig(), bs)
        r = compare(session, model.make_inputs(bs), bs, rounds, seconds)
        missed |= r["ratio_bare"][1] == "MISSED"
        print(
            f"  bs {bs}: kit {r['kit']:.2f} samples/s, bare session.run {r['bare']:.2f}, bare loop "
            f"over the kit's bound call {r['bare_bound']:.2f} (medians of rounds)\n"
            f"    kit/bare session.run {ratio_text(*r['ratio_bare'], TARGET)}\n"
            f"    kit/bare bound call  {ratio_text(*r['ratio_bare_bound'], TARGET)}"
            f"  [threads {session.description['threads']}]"
        )
    return 1 if missed and strict() else 0


if __name__ == "__main__":
    sys.exit(main())
