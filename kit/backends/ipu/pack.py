"""Pack mode (the BERT family, as ByteMLPerf runs it): QPS as benchmark_pack counts it, and the
check that packed samples are kept apart."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kit.backends.ipu.poprt_worker.packing import pack_lengths
from kit.backends.ipu.verdict import mark_not_comparable
from kit.measure.numerics import NumericDiff
from kit.measure.window import BatchMeasurement
from kit.models.spec import ExportedModel
from kit.results.reasons import DifferenceCode


class PackedSession(Protocol):
    """What the pack check needs of an IpuSession in pack mode."""

    pack: dict | None
    description: dict
    isolate: bool

    def run_packed(self, inputs: dict[str, np.ndarray], isolate: bool) -> list[np.ndarray]: ...


PACK_CHECK_SAMPLES = 8
# The largest difference, relative to the outputs' scale, between a sample run alone and packed
# with others that still counts as the same result (the precision's rounding, not attention).
PACK_CHECK_TOLERANCE = {"fp32": 1e-5, "fp16": 1e-3, "fp8": 1e-2}


def check_packing(
    session: PackedSession, model: ExportedModel, precision: str, seed: int = 0
) -> dict:
    """Samples of random lengths (benchmark_pack's population) run twice: packed together, and
    each alone in its pack. Where the model's attention is not packing-aware the samples sharing a
    row attend to each other and the two differ: the row is then not comparable and run() keeps
    sending samples one per pack. Recorded as description["pack_check"]."""
    pack = session.pack
    assert pack, "an IpuSession in pack mode"
    mask = pack["mask_name"]
    n = min(PACK_CHECK_SAMPLES, int(pack["batch_size"]))
    inputs = model.make_inputs(n, seed=seed)
    seq = int(inputs[mask].shape[1])
    top = min(int(pack["benchmark"]["max_valid_seq"]), seq)
    lengths = pack_lengths(np.random.RandomState(seed), float(pack["benchmark"]["avg_len"]), top, n)
    for row, length in enumerate(lengths):
        for name in pack["input_names"]:
            inputs[name][row, length:] = 0
        inputs[mask][row, :length] = 1
    apart = session.run_packed(inputs, isolate=True)
    packed = session.run_packed(inputs, isolate=False)

    def valid(outputs: list[np.ndarray]) -> list[np.ndarray]:
        return [
            np.concatenate([o[r, :length].ravel() for r, length in enumerate(lengths)])
            if o.ndim >= 2 and o.shape[1] == seq
            else o
            for o in outputs
        ]

    diff = NumericDiff.between(
        valid(apart), valid(packed), "the same samples, each alone in its pack"
    )
    scale = max(float(np.abs(np.asarray(o, dtype=np.float64)).max()) for o in valid(apart))
    tolerance = PACK_CHECK_TOLERANCE.get(precision, 1e-3) * max(scale, 1e-6)
    # NaN/Inf are zeroed in max_abs
    apart_ok = diff.max_abs <= tolerance and not diff.nan_count and not diff.inf_count
    check = {
        "lengths": [int(x) for x in lengths],
        "max_abs": diff.max_abs,
        "tolerance": tolerance,
        "samples_kept_apart": apart_ok,
        "method": "random-length samples run packed together and each alone in its pack, compared "
        "on their valid positions",
    }
    d = session.description
    d["pack_check"] = check
    if not apart_ok:
        session.isolate = True
        mark_not_comparable(
            d,
            f"packed samples attend to each other (outputs differ by up to {diff.max_abs:.3g} "
            f"from each sample run alone, tolerance {tolerance:.3g}); run() sends samples one per "
            "pack, so its outputs are right, but the timed pack mode computes mixed attention",
            DifferenceCode.PACKED_ATTENTION,
        )
    return check


def pack_measurement(calls: list, pack: dict) -> BatchMeasurement:
    """Single-sample calls of the pack runner; QPS as ByteMLPerf's benchmark_pack (middle 60 % of
    each thread's calls over their window)."""
    keep = float(pack["benchmark"]["count_percent"])
    m = BatchMeasurement(
        batch_size=1,
        mode="pack",
        threads=len(calls),
        calls=calls,
        extra={"bytemlperf_keep_fraction": keep},
    )
    m.extra.update(
        pack_batch_size=pack["batch_size"],
        samples_per_call=1,
        qps_method=f"ByteMLPerf benchmark_pack: samples in the middle {keep:.0%} of each "
        "client's calls / their window",
    )
    return m
