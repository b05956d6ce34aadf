"""The per-row search: measure the candidates this hardware offers for one published row, keep the
fastest whose precision class fits the row and whose numerics stay within tolerance of the fp32
reference, and cache the decision with its probe table.

Candidates are measured one at a time (one session in memory besides the reference outputs), each
through the kit's own timed window. The configuration the published-precision mapping picks
("today's mapping") is always measured, so every decision states its ratio to it; a faster candidate
replaces it only when the candidate's whole 95 % interval lies above today's throughput (a search
never trades the mapping for noise).

>>> SearchSettings("quick").measure_config().min_duration_s
1.0
"""

from __future__ import annotations

import datetime as dt
import math
import os
import time
from dataclasses import asdict, dataclass, replace

from kit.backends import BackendConfig, require_backend
from kit.backends.onnx_conversion import quantization_method
from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.hardware.environment import usable_cores
from kit.measure.memory import GB, conversion_budget, estimate_need
from kit.measure.noise import idle_sample
from kit.measure.numerics import NumericDiff
from kit.measure.window import BatchMeasurement, MeasureConfig
from kit.models.spec import ExportedModel
from kit.search import cache, runoff, sharing
from kit.search.candidates import DEPTHS, RowCandidate, native_16bit, row_candidates
from kit.search.decision import Decision, Plan
from kit.search.gate import bits, numerics_gate, precision_gate, row_bits
from kit.search.precision_map import PrecisionChoice, map_precision
from kit.search.probe import (
    FAILED,
    Probe,
    Stopwatch,
    nonfinite,
    numerics_record,
    reference_scale,
    release,
    throughput_interval,
    time_session,
)

REFERENCE = RowCandidate("onnxruntime", "fp32", "cpu")
PROBE_DEFAULTS = {"quick": (1.0, 3), "full": (3.0, 10)}  # seconds and calls per candidate
#: Early stop: a candidate is first timed for SCOUT_SHARE of the probe (at least 2 calls); when even
#: the upper end of that short interval is below STOP_BELOW x the low end of the leader's interval so
#: far, it has clearly lost and the rest of its probe is skipped (an interval with no upper end never
#: stops; today's mapping is always timed in full).
SCOUT_SHARE, STOP_BELOW = 0.25, 0.7
FULL_ONLY_WHY = "torch.compile / extra settings take minutes here"
#: On a quiet machine a call longer than the scout's share is a scout on its own: one call has no
#: interval, so its best case is taken as ONE_CALL_SPREAD faster than the faster of it and the
#: candidate's first (numerics) call, so one slow call alone never stops it; contended, scouts keep 2 calls
ONE_CALL_SPREAD = 0.25


@dataclass(frozen=True)
class SearchSettings:
    """How hard to search: `depth` ('quick': short probes, no torch.compile; 'full': every candidate,
    longer probes), probe length, `warmup` (calls before each timed window besides the numerics
    call that every candidate makes first, which already warms it up), `force` (search even when a
    decision is cached), `settle_batch` (the row's largest published batch: a near tie at a smaller
    search batch is settled there where it fits, kit.search.runoff)."""

    depth: str = "quick"
    probe_s: float | None = None
    min_count: int | None = None
    warmup: int = 0
    force: bool = False
    settle_batch: int | None = None

    def __post_init__(self) -> None:
        if self.depth not in DEPTHS:
            raise InvalidParameter("search_depth", self.depth, f"one of {', '.join(DEPTHS)}")
        if self.probe_s is not None and not 0 < self.probe_s < 3600:
            raise InvalidParameter("probe_s", self.probe_s, "seconds, > 0")
        if self.min_count is not None and self.min_count < 2:
            raise InvalidParameter("min_count", self.min_count, ">= 2 (an interval needs two calls)")
        if self.settle_batch is not None and self.settle_batch < 1:
            raise InvalidParameter("settle_batch", self.settle_batch, "a batch size >= 1 (or none)")

    def measure_config(self) -> MeasureConfig:
        seconds, count = PROBE_DEFAULTS[self.depth]
        return MeasureConfig(warmup=self.warmup, min_duration_s=self.probe_s or seconds,
                             min_count=self.min_count or count)


def decide(model: ExportedModel, published: str, batch_size: int, kind: str, settings: SearchSettings,
           *, weights: str = "random", seed: int = 0, candidates: list[RowCandidate] | None = None
           ) -> tuple[Decision, bool]:
    """The row's decision: from the cache when one fits (returned with True), else searched now and
    stored (False)."""
    key = cache.decision_key(model.name, published, batch_size, kind, weights=weights, small=model.small,
                             seed=seed)
    stored = None if settings.force else cache.load_decision(key, settings.depth)
    if stored is not None:
        return stored, True
    decision = search_row(model, published, batch_size, kind, settings, candidates=candidates, seed=seed,
                          weights=weights)
    decision.key, decision.cache_file = key, cache.decision_path(key).name
    cache.store_decision(decision)
    return decision, False


def today_plan(model: ExportedModel, published: str, kind: str, gpu_providers: list[str] | None = None
               ) -> PrecisionChoice:
    providers = kinds.get(kind).ort_providers() if gpu_providers is None else gpu_providers
    return map_precision(published, kind, framework=model.framework, gpu_providers=providers)


def search_row(model: ExportedModel, published: str, batch_size: int, kind: str, settings: SearchSettings,
               *, candidates: list[RowCandidate] | None = None, seed: int = 0, weights: str = "random"
               ) -> Decision:
    """Measure every candidate for the row (or take its figures from the sibling row's search,
    kit.search.sharing) and choose; returns the decision (not cached)."""
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    machine = idle_sample()  # other processes' load and steal now: how far single probes can be trusted
    providers = kinds.get(kind).ort_providers()  # TensorRT, where a session really starts it (FP8 -> int8)
    today = today_plan(model, published, kind, providers)
    if candidates is None:  # reading the graph for the int8 method only where an 8-bit row needs it
        int8 = quantization_method(model) if row_bits(published) == 8 else None
        candidates = row_candidates(model.framework, kind, providers=providers, int8_method=int8)
    candidates = list(candidates)
    if not any(c.matches(today.backend, today.precision, today.device) for c in candidates):
        candidates.insert(0, RowCandidate(today.backend, today.precision, today.device, why="today's mapping"))
    native16 = native_16bit(candidates)
    probes = [to_probe(c, today) for c in candidates]
    plan_probes(probes, candidates, published, native16, settings.depth)
    skip_over_memory_budget(probes, model)
    sibling = None if machine["noisy"] or settings.force else sharing.sibling_decision(
        model, published, batch_size, kind, settings.depth, settings.measure_config().to_dict(), weights=weights,
        seed=seed)
    shared = sharing.borrow(probes, sibling) if sibling else 0
    inputs = model.make_inputs(batch_size, seed=seed)
    measure_all(model, probes, inputs, batch_size, settings, quiet=not machine["noisy"])
    verdict = runoff.run(model, probes, inputs, batch_size, settings.measure_config(),
                         within=runoff.window(contended=machine["noisy"]), settle_batch=settings.settle_batch, seed=seed)
    load = (load_before + os.getloadavg()[0]) / 2  # the 1-minute load average, start and end
    return replace(
        choose(probes, published, today, verdict), runoff=verdict,
        model=model.name, published=published.upper(), batch_size=batch_size, kind=kind,
        depth=settings.depth, settings={**asdict(settings), "probe": settings.measure_config().to_dict()},
        native_16bit=list(native16), searched_s=round(time.perf_counter() - started, 1),
        shared_probes=shared, shared_from=sibling.cache_file if sibling else None,
        machine_at_start={"noisy": machine["noisy"], "reasons": machine["reasons"],
                          "other_load": machine.get("other_load"), "steal_share": machine.get("steal_share")},
        load_average=round(load, 2), cores=usable_cores(),
        # others' load or steal in the idle moment before it (the load average counts the search's own threads)
        contended=machine["noisy"],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


def to_probe(c: RowCandidate, today: PrecisionChoice) -> Probe:
    return Probe(c.label, c.backend, c.precision, c.device, dict(c.options), c.threads, c.native, c.why,
                 today=c.matches(today.backend, today.precision, today.device), fallback_for=c.fallback_for)


def skip_over_memory_budget(probes: list[Probe], model: ExportedModel) -> None:
    """An explicitly asked static int8 whose calibration would need more than the conversion budget
    (3 x the ONNX file + 2 GB) is not probed: Swin-L's needs about 6.6 GB against 4.4."""
    from pathlib import Path

    size = Path(model.onnx_path).stat().st_size
    budget = conversion_budget(size)
    for p in probes:
        if p.status == "pending" and p.options.get("quantization") == "static-qdq":
            need = estimate_need("int8-static", size)
            if need > budget:
                p.status, p.reason = "not probed", (f"static int8 calibration needs about {need / GB:.1f} GB, "
                                                    f"over the {budget / GB:.1f} GB conversion budget")


def plan_probes(probes: list[Probe], candidates: list[RowCandidate], published: str,
                native16: tuple[str, ...], depth: str) -> None:
    """Mark what will not be measured, and why: the precision-class gate, then the depth."""
    for p, c in zip(probes, candidates, strict=True):
        reason = precision_gate(p.precision, published)
        if reason:
            p.status, p.reason = "not eligible", reason
        elif p.today:
            p.status = "pending"
        elif depth == "quick" and c.fallback_for:
            p.status = "fallback"  # settled once the candidate it stands in for is measured
        elif depth == "quick" and c.depth == "full":
            p.status, p.reason = "not probed", f"full search only ({c.full_only_why or FULL_ONLY_WHY})"
        elif depth == "quick" and bits(p.precision) == 16 and not p.native:
            p.status, p.reason = "not probed", emulated_why(p.precision, native16)
        else:
            p.status = "pending"


def emulated_why(precision: str, native16: tuple[str, ...]) -> str:
    """Why a quick search leaves an emulated 16-bit type out: its arithmetic is fp32 with conversions
    around it, so it trails fp32 (which every FP16 and FP8 row may run at) or the native 16-bit type.
    On a Xeon with neither avx512_bf16 nor avx512_fp16, emulated types ran 0.02-0.92x the fastest
    fp32 on resnet50 and Swin-L and took 105 of Swin-L's 135 s search (docs/backends.md)."""
    than = f"native {'/'.join(native16)}" if native16 else "fp32, which any FP16 or FP8 row may run at"
    return (f"emulated {precision} (fp32 arithmetic with conversions around it) is slower than {than} "
            "(a full search measures it)")


def measure_all(model: ExportedModel, probes: list[Probe], inputs: dict, batch: int,
                settings: SearchSettings, quiet: bool = False) -> None:
    """The fp32 reference outputs first (ORT fp32, when a candidate, scouted on the same session),
    then each pending candidate: load, numerics gate, timed window, close; last, the reference's
    probe in full where its scout did not clearly lose."""
    mcfg = settings.measure_config()
    min_scout = 1 if quiet else 2
    ref_session = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), batch)
    try:
        with Stopwatch() as first:
            ref_out = ref_session.run(inputs)
        ref_probe = next((p for p in probes if p.status == "pending" and p.plan() == REFERENCE.plan()), None)
        if ref_probe is not None:
            ref_probe.first_call = batch / first.seconds
            ref_probe.numerics = {"mean_abs": 0.0, "max_abs": 0.0, "relative_error": 0.0,
                                  "numerics_ok": True, "numerics_reason": "this is the reference"}
            # scouted now (the reference call warmed it up) and settled against the final leader
            ref_cfg = mcfg if ref_probe.today else scout_config(mcfg, min_scout)
            ref_scout = time_session(ref_session, inputs, batch, ref_cfg)
            record_timing(ref_probe, ref_scout)
    finally:
        ref_session.close()
        del ref_session
        release()
    scale, ref_bad = reference_scale(ref_out), nonfinite(ref_out)
    # today's mapping first (a yardstick early), then the narrower types, usually the faster: the
    # early stop then cuts the slow wide ones short
    for p in sorted(probes, key=lambda q: (not q.today, bits(q.precision))):
        if p.status == "pending":
            probe_one(model, p, inputs, batch, mcfg, ref_out, scale, ref_bad, leader_of(probes), min_scout)
    for p in probes:
        if p.status == "fallback" and settle_fallback(p, probes):
            probe_one(model, p, inputs, batch, mcfg, ref_out, scale, ref_bad, leader_of(probes), min_scout)
    if ref_probe is not None and not ref_probe.today:
        settle_reference(model, ref_probe, ref_scout, probes, inputs, batch, mcfg)


def settle_reference(model: ExportedModel, ref: Probe, scout: BatchMeasurement, probes: list[Probe],
                     inputs: dict, batch: int, mcfg: MeasureConfig) -> None:
    """The reference's scout against the fastest other candidate: stopped early where it clearly
    lost, else the rest of its probe timed on a fresh session of it (after one warm-up call)."""
    leader = leader_of([q for q in probes if q is not ref])
    if leader is not None and stop_early(ref, leader):
        return
    session = None
    try:
        session = require_backend(ref.backend).load(model, ref.backend_config(), batch)
        rest = replace(rest_config(mcfg, scout), warmup=1)
        record_timing(ref, scout, time_session(session, inputs, batch, rest))
    except Exception as exc:  # noqa: BLE001 - a scout alone never wins: failed, its figures kept
        ref.status = "failed"
        ref.reason = (f"its full probe failed ({type(exc).__name__}: {str(exc)[:200]}); its scout: "
                      f"{ref.throughput:.3g} samples/s over {ref.calls} call(s)")
    finally:
        if session is not None:
            session.close()
        del session
        release()


def leader_of(probes: list[Probe]) -> Probe | None:
    return max((q for q in probes if q.status == "measured"), key=lambda q: q.throughput, default=None)


def settle_fallback(p: Probe, probes: list[Probe]) -> bool:
    """Whether a quick search measures the fallback `p` (True, marked pending): only where the
    candidate it stands in for failed or was not measured; otherwise marked not probed, with why."""
    first = next((q for q in probes if q.label == p.fallback_for), None)
    if first is None or first.status in FAILED:
        p.status = "pending"
        return True
    p.status, p.reason = "not probed", (f"measured only where {p.fallback_for} fails (it passed the numerics "
                                        "gate); a full search measures it")
    return False


def probe_one(model: ExportedModel, p: Probe, inputs: dict, batch: int, mcfg: MeasureConfig,
              ref_out: list, scale: float, ref_bad: int, leader: Probe | None = None, min_scout: int = 2) -> None:
    session = None
    try:
        with Stopwatch() as load:
            session = require_backend(p.backend).load(model, p.backend_config(), batch)
        p.load_s = round(load.seconds, 2)
        notes = session.description.get("notes") or []
        if p.options.get("compile") and any("fell back to eager" in n for n in notes):
            p.status, p.reason = "failed", next(n for n in notes if "fell back" in n)
            return
        with Stopwatch() as first:
            out = session.run(inputs)
        p.first_call = batch / first.seconds
        diff = NumericDiff.between(ref_out, out)
        verdict = numerics_gate(p.precision, diff.mean_abs, scale, max(0, nonfinite(out) - ref_bad))
        p.numerics = {**numerics_record(diff), **verdict.to_dict()}
        if not verdict.ok:
            p.status, p.reason = "failed numerics", verdict.reason + " (not timed)"
            return
        scout = None
        if leader is not None and not p.today:
            stopped, scout = scout_window(p, leader, session, inputs, batch, mcfg, min_scout)
            if stopped:
                return
        rest = time_session(session, inputs, batch, rest_config(mcfg, scout))
        record_timing(p, *([scout] if scout is not None else []), rest)
    except Exception as exc:  # noqa: BLE001 - one candidate failing never stops the row's search
        p.status, p.reason = "failed", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    finally:
        if session is not None:
            session.close()
        del session
        release()


def scout_config(mcfg: MeasureConfig, min_count: int = 2) -> MeasureConfig:
    return MeasureConfig(warmup=0, min_duration_s=mcfg.min_duration_s * SCOUT_SHARE, min_count=min_count)


def rest_config(mcfg: MeasureConfig, scout: BatchMeasurement | None) -> MeasureConfig:
    """What the probe still times after its scout: the scout's calls count towards its minimums."""
    if scout is None:
        return mcfg
    return MeasureConfig(warmup=0, min_duration_s=max(0.0, mcfg.min_duration_s - scout.wall_time_s),
                         min_count=max(1, mcfg.min_count - scout.latency.count))


def scout_window(p: Probe, leader: Probe, session, inputs: dict, batch: int, mcfg: MeasureConfig,
                 min_count: int = 2) -> tuple[bool, BatchMeasurement]:
    """Time a short scout window (at least `min_count` calls): (True, it) with `p` marked lost and
    its figures when it clearly loses to the leader so far; (False, it) otherwise, its calls then
    part of the probe."""
    scout = time_session(session, inputs, batch, scout_config(mcfg, min_count))
    record_timing(p, scout)
    return stop_early(p, leader), scout


def best_case(p: Probe) -> float:
    """The top of `p`'s interval; for one timed call, ONE_CALL_SPREAD above it or above the first
    (numerics) call, whichever ran faster (one slow call alone never stops a candidate); none (inf)
    without an interval."""
    if p.calls == 1:
        return max(p.throughput, p.first_call or 0.0) * (1 + ONE_CALL_SPREAD)
    return p.high if p.high is not None and p.high == p.high else math.inf


def stop_early(p: Probe, leader: Probe) -> bool:
    """Whether the scouted `p` clearly loses to `leader` (then marked lost, with its figures)."""
    top = best_case(p)
    yardstick = leader.low if leader.low is not None and leader.low == leader.low else leader.throughput
    if top >= STOP_BELOW * yardstick:
        return False
    calls = (f"{p.calls} calls" if p.calls > 1 else
             f"1 call (the first call: {p.first_call or math.nan:.3g}), the faster taken as up to {ONE_CALL_SPREAD:.0%} slow")
    p.status = "lost"
    p.reason = (f"stopped early: {p.throughput:.3g} samples/s over {calls} (at most {top:.3g}), below "
                f"{STOP_BELOW:g} x the low end of the leader so far ({leader.label}, {yardstick:.3g})")
    return True


def record_timing(p: Probe, *windows: BatchMeasurement) -> None:
    p.throughput, p.low, p.high = throughput_interval(*windows)
    p.calls = sum(m.latency.count for m in windows)
    p.status = "measured"


def choose(probes: list[Probe], published: str, today: PrecisionChoice,
           verdict: dict | None = None) -> Decision:
    """The runoff's winner (`verdict`: the leader and the candidates close behind it timed side by
    side, kit.search.runoff); without one, the fastest measured candidate unless its interval
    overlaps today's mapping's (then today's stays). Every other probe gets its reason."""
    measured = [p for p in probes if p.status == "measured"]
    today_probe = next((p for p in probes if p.today), None)
    if not measured:
        for p in probes:
            p.status = p.status if p.status != "pending" else "not probed"
        label = today_probe.label if today_probe else None
        return Decision(label, label, fallback=True, probes=list(probes), plan=Plan(
            today.backend, today.precision, today.device,
            precision_note=today.note + " (the per-row search measured no candidate: today's mapping kept)"))
    best = max(measured, key=lambda p: p.throughput)
    kept_for_noise = False
    if verdict:  # the side-by-side duels decide (kit.search.runoff)
        best = next(p for p in measured if p.label == verdict["winner"])
    elif today_probe is not None and today_probe.status == "measured" and best is not today_probe \
            and not clearly_faster(best, today_probe):
        best, kept_for_noise = today_probe, True
    for p in measured:
        p.status = "chosen" if p is best else "lost"
        taken = f"taken by {p.shared_from}" if p.shared_from else ""
        if p is best:
            p.reason = f"probe {taken}" if taken else p.reason
        else:
            p.reason = f"{p.throughput / best.throughput:.2f}x the chosen's throughput (probe{', ' + taken if taken else ''})"
            if kept_for_noise and p.throughput > best.throughput:
                p.reason = ("faster by its point estimate, but its interval reaches below today's "
                            "mapping's throughput: today's mapping kept")
        p.reason += runoff_text(verdict, p)
    ratio, ratio_iv, ratio_batch = duel_ratio(verdict, best, today_probe) or (*ratio_to(best, today_probe), None)
    return Decision(best.label, today_probe.label if today_probe else None,
                    Plan(**best.plan(), precision_note=note(best, today_probe, today, published, ratio, measured,
                                                            probes, ratio_batch)),
                    ratio_vs_today=ratio, ratio_interval=ratio_iv, ratio_batch=ratio_batch,
                    separated=bool(today_probe is None or best is today_probe or separated(best, today_probe)),
                    probes=list(probes))


def duel_ratio(verdict: dict | None, best: Probe, today: Probe | None) -> tuple[float, list, int | None] | None:
    """best ÷ today from their side-by-side duel (median, the lowest and highest round, and the batch
    where a settle measured it, else None), if they fought one: the last, so a near tie settled at the
    published batch speaks for it."""
    for d in reversed((verdict or {}).get("duels", [])):
        if today is None or best is today or "error" in d or {d["leader"], d["challenger"]} != {best.label, today.label}:
            continue
        ratios = d["ratios"] if d["challenger"] == best.label else [1 / r for r in d["ratios"]]
        median = d["median"] if d["challenger"] == best.label else 1 / d["median"]
        return median, [min(ratios), max(ratios)], d.get("batch")
    return None


def runoff_text(verdict: dict | None, p: Probe) -> str:
    """What the side-by-side duels said about `p` ('' where it fought none)."""
    parts = []
    for d in (verdict or {}).get("duels", []):
        if p.label not in (d["leader"], d["challenger"]):
            continue
        other = d["challenger"] if p.label == d["leader"] else d["leader"]
        if "error" in d:
            parts.append(f"runoff with {other} failed: {d['error']}")
            continue
        mine = d["median"] if p.label == d["challenger"] else 1 / d["median"]
        at = f" at batch {d['batch']}, settling a near tie" if d.get("batch") else ""
        rounds = f"median of {len(d['ratios'])} alternating rounds" if len(d["ratios"]) > 1 else "one round"
        parts.append(f"side by side with {other}{at}: {mine:.2f}x ({rounds})")
    parts += [n["text"] for n in (verdict or {}).get("settle", []) if p.label in n["pair"]]
    if not parts:
        return ""
    return ("; " if p.reason else "") + "; ".join(parts)


def clearly_faster(a: Probe, b: Probe) -> bool:
    """Whether a's whole interval lies above b's throughput (no interval: the point estimates)."""
    if a.low is None or a.low != a.low:
        return a.throughput > b.throughput
    return a.low > b.throughput


def separated(a: Probe, b: Probe) -> bool:
    """Whether a's throughput interval lies wholly above b's (no interval: the point estimates)."""
    if a.low is None or a.low != a.low:
        return a.throughput > b.throughput
    return b.high is not None and a.low > b.high  # no upper bound on b: not separated


def ratio_to(best: Probe, today: Probe | None) -> tuple[float | None, list]:
    if today is None or today.status not in ("chosen", "lost") or not today.throughput:
        return None, [None, None]
    if best is today:
        return 1.0, [1.0, 1.0]
    lo = best.low / today.high if best.low and today.high else None
    hi = best.high / today.low if best.high and today.low else None
    return best.throughput / today.throughput, [lo, hi]


def note(best: Probe, today_probe: Probe | None, today: PrecisionChoice, published: str, ratio: float | None,
         measured: list[Probe], probes: list[Probe], ratio_batch: int | None = None) -> str:
    """The precision note a report prints for the chosen configuration: what won, its ratio to
    today's mapping, and, where a higher precision stands in for the published one, both
    throughputs against the best candidate of the published class (or why none was measured)."""
    head = (f"chosen by the per-row search: {best.label}, "
            + (f"the fastest of {len(measured)} measured candidates within numerics tolerance" if len(measured) > 1
               else "the only candidate measured within numerics tolerance (the others: not eligible, not "
                    "probed at this depth, or failed)"))
    if ratio is not None and best is not today_probe:
        head += f", {ratio:.2f}x today's mapping ({today_probe.label})" + (
            f" at batch {ratio_batch}, where a near tie at the search's batch was settled" if ratio_batch else "")
    elif best is today_probe:
        head += " (today's mapping)"
    want = row_bits(published)
    if bits(best.precision) > want:
        same = [p for p in measured if bits(p.precision) == want]
        top = max(same, key=lambda p: p.throughput) if same else None
        why = (f"; {best.precision} stands in for {published.upper()}: "
               + (f"faster here ({best.throughput:.3g} vs {top.throughput:.3g} samples/s, "
                  f"{best.throughput / top.throughput:.2f}x the best {published.upper()}-class candidate, {top.label})"
                  if top else f"no {published.upper()}-class candidate was measured here ("
                  + unmeasured([p for p in probes if bits(p.precision) == want]) + ")"))
    elif best.precision == today.precision and best.backend == today.backend:
        why = f"; {today.note}"
    else:
        why = f"; IPU {published.upper()} -> {best.precision} ({'native' if best.native else 'emulated'} here)"
    return head[0].upper() + head[1:] + why


def unmeasured(same_class: list[Probe]) -> str:
    """Why none of the published class's candidates has a throughput: each one's status, or that
    every one is an emulated 16-bit type left to a full search (kit.search.row.plan_probes)."""
    if not same_class:
        return "none runs on this hardware"
    if all(p.status == "not probed" and not p.native and bits(p.precision) == 16 for p in same_class):
        return (f"each is emulated on this hardware, fp32 arithmetic with conversions around it, and a quick "
                f"search leaves them to a full search: {', '.join(p.label for p in same_class)}")
    return ", ".join(f"{p.label}: {p.status}" for p in same_class)
