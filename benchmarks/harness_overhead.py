"""Harness overhead: the kit's measured throughput vs a bare `session.run` loop (target >= 0.98).

resnet50 fp32 on ONNX Runtime CPU at batch 1 and 8: one session, the same inputs and threads,
in alternating rounds (kit first in even rounds, bare first in odd ones) so drift hits both.
The kit's call uses IO binding (inputs staged once); the bare loop calls `session.run` as a
user would. Knobs: BENCH_ROUNDS (default 4), BENCH_SECONDS per side per round (default 3).
"""

from __future__ import annotations

import statistics
import sys

from benchmarks.common import bare_loop, env_float, env_int, load_note, strict
from kit.backends import BackendConfig, require_backend
from kit.measure import MeasureConfig
from kit.models import export_model

TARGET = 0.98
BATCH_SIZES = (1, 8)


def compare(session, inputs: dict, batch_size: int, rounds: int, seconds: float) -> dict:
    """Per-round throughputs of the kit's measure() and of a bare session.run loop."""
    ort_session, names = session.session, session.output_names
    cfg = MeasureConfig(warmup=2, min_duration_s=seconds, min_count=3)
    kit, bare = [], []
    for r in range(rounds):
        for side in (("kit", "bare") if r % 2 == 0 else ("bare", "kit")):
            if side == "kit":
                kit.append(session.measure(inputs, batch_size, cfg).throughput)
            else:
                ort_session.run(names, inputs)  # same warm-up as the kit gets
                n, elapsed = bare_loop(lambda: ort_session.run(names, inputs), seconds)
                bare.append(n * batch_size / elapsed)
    ratios = [k / b for k, b in zip(kit, bare, strict=True)]
    return {"kit": kit, "bare": bare, "ratio_median": statistics.median(ratios),
            "ratio_of_means": statistics.fmean(kit) / statistics.fmean(bare)}


def main() -> int:
    rounds, seconds = env_int("BENCH_ROUNDS", 4), env_float("BENCH_SECONDS", 3.0)
    model = export_model("resnet50-torch-fp32")
    backend = require_backend("onnxruntime")
    missed = False
    print(f"resnet50 fp32, onnxruntime CPU; {rounds} alternating rounds of {seconds:g} s per side "
          f"({load_note()})")
    for bs in BATCH_SIZES:
        session = backend.load(model, BackendConfig(), bs)
        r = compare(session, model.make_inputs(bs), bs, rounds, seconds)
        ok = r["ratio_median"] >= TARGET
        missed |= not ok
        print(f"  bs {bs}: kit {statistics.median(r['kit']):.2f} samples/s, bare session.run "
              f"{statistics.median(r['bare']):.2f} samples/s; kit/bare median ratio "
              f"{r['ratio_median']:.3f} (of means {r['ratio_of_means']:.3f}), target >= {TARGET}: "
              f"{'met' if ok else 'MISSED'}  [threads {session.description['threads']}]")
    return 1 if missed and strict() else 0


if __name__ == "__main__":
    sys.exit(main())
