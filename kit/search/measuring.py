"""Measuring a row's candidates: the fp32 reference outputs first, then each pending candidate
loaded, gated on its numerics and timed through the kit's own window, one session at a time; a
short scout first, and the rest of the probe skipped where the scout clearly loses to the leader so
far (today's mapping is always timed in full).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kit.backends import BackendConfig, reference_outputs, require_backend
from kit.measure.numerics import NumericDiff
from kit.measure.window import BatchMeasurement, MeasureConfig
from kit.search.candidates import RowCandidate
from kit.search.context import SearchContext
from kit.search.gate import bits, numerics_gate
from kit.search.probe import (
    FAILED,
    Probe,
    ProbeStatus,
    Stopwatch,
    nonfinite,
    numerics_record,
    reference_scale,
    release,
    throughput_interval,
    time_session,
)

REFERENCE = RowCandidate.of("onnxruntime", "fp32", "cpu")
#: Early stop: a candidate is first timed for SCOUT_SHARE of the probe (at least 2 calls); when even
#: the upper end of that short interval is below STOP_BELOW x the low end of the leader's interval
#: so far, it has clearly lost and the rest of its probe is skipped (an interval with no upper end
#: never stops; today's mapping is always timed in full).
SCOUT_SHARE, STOP_BELOW = 0.25, 0.7
#: On a quiet machine a call longer than the scout's share is a scout on its own: one call has no
#: interval, so its best case is taken as ONE_CALL_SPREAD faster than the faster of it and the
#: candidate's first (numerics) call, so one slow call alone never stops it; contended, scouts keep
#: 2 calls
ONE_CALL_SPREAD = 0.25


@dataclass(frozen=True)
class Reference:
    """The fp32 reference's outputs each candidate's are compared with, their scale and how many
    of them are not finite."""

    outputs: list
    scale: float
    nonfinite: int

    @classmethod
    def of(cls, outputs: list) -> Reference:
        return cls(outputs, reference_scale(outputs), nonfinite(outputs))


def measure_all(ctx: SearchContext, probes: list[Probe], quiet: bool = False) -> None:
    """The fp32 reference outputs first (ORT fp32, when a candidate, scouted on the same session),
    then each pending candidate: load, numerics gate, timed window, close (or, while it leads and
    loading it again would compile it again, kept open by the context's keeper for the row's
    measurement); last, the reference's probe in full where its scout did not clearly lose."""
    min_scout = 1 if quiet else 2
    ref_probe = next(
        (p for p in probes if p.status == ProbeStatus.PENDING and p.plan() == REFERENCE.plan()),
        None,
    )
    reference, ref_scout = reference_for(ctx, ref_probe, min_scout)
    # today's mapping first (a yardstick early), then the narrower types, usually the faster: the
    # early stop then cuts the slow wide ones short
    for p in sorted(probes, key=lambda q: (not q.today, bits(q.placement.precision))):
        if p.status == ProbeStatus.PENDING:
            probe_one(ctx, p, reference, leader=leader_of(probes), min_scout=min_scout)
    for p in probes:
        if p.status == ProbeStatus.FALLBACK and settle_fallback(p, probes):
            probe_one(ctx, p, reference, leader=leader_of(probes), min_scout=min_scout)
    if ref_probe is not None and ref_scout is not None and not ref_probe.today:
        settle_reference(ctx, ref_probe, ref_scout, probes)
    ctx.keeper.keep_only(ctx.batch, getattr(leader_of(probes), "label", None))


def reference_for(
    ctx: SearchContext, ref_probe: Probe | None, min_scout: int
) -> tuple[Reference, BatchMeasurement | None]:
    """The fp32 reference's outputs on the search's inputs, and its probe's scout: read from an
    earlier call where the reference is not a candidate still to probe
    (kit.backends.reference_outputs), else from ORT fp32 loaded now, `ref_probe` scouted on the
    same session (the reference call warmed it up; settled later against the final leader). The
    row's measurement checks against the same outputs."""
    model, inputs, batch, mcfg = ctx.model, ctx.inputs, ctx.batch, ctx.window
    recalled = None if ref_probe is not None else reference_outputs.recall(model, batch, inputs)
    if recalled is not None:
        return Reference.of(recalled.outputs), None
    ref_scout = None
    ref_session = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), batch)
    try:
        with Stopwatch() as first:
            ref_out = ref_session.run(inputs)
        if ref_probe is not None:
            ref_probe.first_call = batch / first.seconds
            ref_probe.numerics = {
                "mean_abs": 0.0,
                "max_abs": 0.0,
                "relative_error": 0.0,
                "numerics_ok": True,
                "numerics_reason": "this is the reference",
            }
            ref_cfg = mcfg if ref_probe.today else scout_config(mcfg, min_scout)
            ref_scout = time_session(ref_session, inputs, batch, ref_cfg)
            record_timing(ref_probe, ref_scout)
    finally:
        ref_session.close()
        del ref_session
        release()
    reference_outputs.remember(
        model, batch, inputs, ref_out, "the search's call on the same inputs"
    )
    return Reference.of(ref_out), ref_scout


def settle_reference(
    ctx: SearchContext, ref: Probe, scout: BatchMeasurement, probes: list[Probe]
) -> None:
    """The reference's scout against the fastest other candidate: stopped early where it clearly
    lost, else the rest of its probe timed on a fresh session of it (after one warm-up call)."""
    leader = leader_of([q for q in probes if q is not ref])
    if leader is not None and stop_early(ref, leader):
        return
    session = None
    try:
        session = require_backend(ref.placement.backend).load(
            ctx.model, ref.backend_config(), ctx.batch
        )
        rest = replace(rest_config(ctx.window, scout), warmup=1)
        record_timing(ref, scout, time_session(session, ctx.inputs, ctx.batch, rest))
    except Exception as exc:  # noqa: BLE001 - a scout alone never wins: failed, its figures kept
        ref.status = ProbeStatus.FAILED
        ref.reason = (
            f"its full probe failed ({type(exc).__name__}: {str(exc)[:200]}); its scout: "
            f"{ref.throughput:.3g} samples/s over {ref.calls} call(s)"
        )
    finally:
        if session is not None:
            session.close()
        del session
        release()


def leader_of(probes: list[Probe]) -> Probe | None:
    return max(
        (q for q in probes if q.status == ProbeStatus.MEASURED), key=lambda q: q.rate, default=None
    )


def settle_fallback(p: Probe, probes: list[Probe]) -> bool:
    """Whether a quick search measures the fallback `p` (True, marked pending): only where the
    candidate it stands in for failed or was not measured; otherwise marked not probed, with why."""
    first = next((q for q in probes if q.label == p.fallback_for), None)
    if first is None or first.status in FAILED:
        p.status = ProbeStatus.PENDING
        return True
    p.status, p.reason = (
        ProbeStatus.NOT_PROBED,
        (
            f"measured only where {p.fallback_for} fails (it passed the numerics "
            "gate); a full search measures it"
        ),
    )
    return False


def probe_one(
    ctx: SearchContext,
    p: Probe,
    reference: Reference,
    *,
    leader: Probe | None = None,
    min_scout: int = 2,
) -> None:
    """`p` loaded, gated on its numerics against `reference` and timed (a scout first where a
    `leader` is ahead, stopped early where it clearly loses); its session closed or, where it leads
    and would be compiled again to load, kept by the context's keeper."""
    model, inputs, batch, mcfg = ctx.model, ctx.inputs, ctx.batch, ctx.window
    session = None
    try:
        with Stopwatch() as load:
            session = require_backend(p.placement.backend).load(model, p.backend_config(), batch)
        p.load_s = round(load.seconds, 2)
        p.compile_s = session.description.get("compile_s")
        p.compile_cache = session.description.get("compile_cache")
        p.engine_reused = session.description.get("engine_reused")
        if p.placement.options.compiles and (
            fallback := session.description.get("compile_fallback")
        ):
            p.status, p.reason = (
                ProbeStatus.FAILED,
                f"torch.compile failed ({fallback}); fell back to eager",
            )
            return
        with Stopwatch() as first:
            out = session.run(inputs)
        p.first_call = batch / first.seconds
        diff = NumericDiff.between(reference.outputs, out)
        verdict = numerics_gate(
            p.placement.precision,
            diff.mean_abs,
            reference.scale,
            max(0, nonfinite(out) - reference.nonfinite),
        )
        p.numerics = {**numerics_record(diff), **verdict.to_dict()}
        if not verdict.ok:
            p.status, p.reason = ProbeStatus.FAILED_NUMERICS, verdict.reason + " (not timed)"
            return
        scout = None
        if leader is not None and not p.today:
            stopped, scout = scout_window(ctx, p, leader, session, min_count=min_scout)
            if stopped:
                return
        rest = time_session(session, inputs, batch, rest_config(mcfg, scout))
        record_timing(p, *([scout] if scout is not None else []), rest)
    except Exception as exc:  # noqa: BLE001 - one candidate failing never stops the row's search
        p.status, p.reason = (
            ProbeStatus.FAILED,
            f"{type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}",
        )
    finally:
        if session is not None and not ctx.keeper.offer(batch, p, session, leader):
            session.close()
        del session
        release()


def scout_config(mcfg: MeasureConfig, min_count: int = 2) -> MeasureConfig:
    return MeasureConfig(
        warmup=0, min_duration_s=mcfg.min_duration_s * SCOUT_SHARE, min_count=min_count
    )


def rest_config(mcfg: MeasureConfig, scout: BatchMeasurement | None) -> MeasureConfig:
    """What the probe still times after its scout: the scout's calls count towards its minimums."""
    if scout is None:
        return mcfg
    return MeasureConfig(
        warmup=0,
        min_duration_s=max(0.0, mcfg.min_duration_s - scout.wall_time_s),
        min_count=max(1, mcfg.min_count - scout.latency.count),
    )


def scout_window(
    ctx: SearchContext, p: Probe, leader: Probe, session, *, min_count: int = 2
) -> tuple[bool, BatchMeasurement]:
    """Time a short scout window (at least `min_count` calls): (True, it) with `p` marked lost and
    its figures when it clearly loses to the leader so far; (False, it) otherwise, its calls then
    part of the probe."""
    scout = time_session(session, ctx.inputs, ctx.batch, scout_config(ctx.window, min_count))
    record_timing(p, scout)
    return stop_early(p, leader), scout


def best_case(p: Probe) -> float:
    """The top of `p`'s interval; for one timed call, ONE_CALL_SPREAD above it or above the first
    (numerics) call, whichever ran faster (one slow call alone never stops a candidate); none (inf)
    without an interval."""
    if p.calls == 1:
        return max(p.rate, p.first_call or 0.0) * (1 + ONE_CALL_SPREAD)
    return p.high if p.high is not None and p.high == p.high else math.inf


def yardstick(leader: Probe) -> float:
    """What a scout is stopped against: the low end of the leader's interval (its rate without
    one)."""
    return leader.low if leader.low is not None and leader.low == leader.low else leader.rate


def stop_early(p: Probe, leader: Probe) -> bool:
    """Whether the scouted `p` clearly loses to `leader` (then marked lost, with its figures)."""
    top, against = best_case(p), yardstick(leader)
    if top >= STOP_BELOW * against:
        return False
    calls = (
        f"{p.calls} calls"
        if p.calls > 1
        else f"1 call (the first call: {p.first_call or math.nan:.3g}), the faster taken as up to "
        f"{ONE_CALL_SPREAD:.0%} slow"
    )
    p.status, p.stopped_early = ProbeStatus.LOST, True
    p.reason = (
        f"stopped early: {p.throughput:.3g} samples/s over {calls} (at most {top:.3g}), below "
        f"{STOP_BELOW:g} x the low end of the leader so far ({leader.label}, {against:.3g})"
    )
    return True


def record_timing(p: Probe, *windows: BatchMeasurement) -> None:
    p.throughput, p.low, p.high = throughput_interval(*windows)
    p.calls = sum(m.latency.count for m in windows)
    p.status = ProbeStatus.MEASURED
