"""Probes a row's search takes from its sibling row's: the FP16 and FP8 rows of one model search at
the same batch size, with the same seeded inputs and probe settings, and every candidate of 16 bits
or more is eligible for both. A search takes those figures from the sibling's cached decision
instead of measuring them again, each marked with where it came from.

Only from a decision searched on a quiet machine into a search starting on a quiet one (probes
taken minutes apart are compared as probes taken seconds apart are), never today's mapping (every
decision measures its own yardstick), and never a candidate that failed there (measured again).

>>> SIBLING[PublishedPrecision.FP8]
<PublishedPrecision.FP16: 'FP16'>
"""

from __future__ import annotations

from kit.models.spec import ExportedModel
from kit.precision import PublishedPrecision
from kit.search import cache
from kit.search.decision import Decision
from kit.search.gate import bits, precision_gate
from kit.search.measuring import STOP_BELOW, best_case, yardstick
from kit.search.probe import Probe, ProbeStatus

SIBLING = {
    PublishedPrecision.FP16: PublishedPrecision.FP8,
    PublishedPrecision.FP8: PublishedPrecision.FP16,
}
COPIED = (
    "throughput",
    "low",
    "high",
    "calls",
    "load_s",
    "compile_s",
    "compile_cache",
    "engine_reused",
    "first_call",
    "numerics",
    "stopped_early",
)


def sibling_decision(
    model: ExportedModel,
    published: str,
    batch_size: int,
    kind: str,
    depth: str,
    probe: dict,
    *,
    weights: str = "random",
    seed: int = 0,
) -> Decision | None:
    """The sibling row's cached decision at the same batch and probe settings (a deeper search's
    serves too), searched on a quiet machine; None where there is none."""
    other = SIBLING.get(PublishedPrecision.parse(published))
    if other is None:
        return None
    key = cache.decision_key(
        model.name, other, batch_size, kind, weights=weights, small=model.small, seed=seed
    )
    stored = cache.load_decision(key, depth)
    if stored is None or stored.contended or stored.settings.get("probe") != probe:
        return None
    return stored


def shareable(p: Probe) -> bool:
    """Whether a row's probe may take the sibling's figures: 16 bits or more, not its own
    mapping."""
    return not p.today and bits(p.placement.precision) >= 16


def borrow(probes: list[Probe], sibling: Decision, published: str) -> int:
    """Fill each pending probe of 16 bits or more (today's mapping aside) that the sibling measured;
    returns how many were taken. One the sibling stopped early (a scout, not a full probe) stays
    lost only where a candidate that stops it was measured in full there, may run this row
    (`published`'s class) and is measured by this row too: the FP8 row stops the 16-bit candidates
    against its int8 leader, which an FP16 row may not choose, so there they are measured again
    (taken as lost, an FP16 row once chose OpenVINO fp32 at 35/s over the bf16 that the FP8 row had
    stopped at 178/s)."""
    theirs = {p.label: p for p in sibling.probes}
    source = (
        f"the {sibling.published} row's search ({sibling.cache_file or '?'}, "
        f"{sibling.created_at or '?'})"
    )
    here = {p.label for p in probes if p.today or p.status == ProbeStatus.PENDING}
    taken = 0
    for p in probes:
        q = theirs.get(p.label)
        if p.status != ProbeStatus.PENDING or not shareable(p) or q is None:
            continue
        if q.status not in (ProbeStatus.CHOSEN, ProbeStatus.LOST) or not q.throughput:
            continue
        stopper = stopped_by(q, sibling, published, here) if q.stopped_early else None
        if q.stopped_early and stopper is None:
            continue
        for name in COPIED:
            setattr(p, name, getattr(q, name))
        p.shared_from = q.shared_from or source  # where it was measured, if the sibling took it too
        if stopper is not None:
            p.status, p.reason = (
                ProbeStatus.LOST,
                f"in {p.shared_from}: stopped early: {q.throughput:.3g} samples/s over "
                f"{q.calls} call(s) (at most {best_case(q):.3g}), below {STOP_BELOW:g} x the low "
                f"end of {stopper.label} there ({yardstick(stopper):.3g}), which this row "
                "measures too",
            )
        else:
            p.status = ProbeStatus.MEASURED
        taken += 1
    return taken


def stopped_by(q: Probe, sibling: Decision, published: str, here: set[str]) -> Probe | None:
    """A candidate the sibling measured in full that stops `q` (kit.search.measuring.stop_early's
    rule), that the published class `published` admits and that this row measures too (its label
    in `here`); None where there is none, and `q` is measured again."""
    top = best_case(q)
    return next(
        (
            r
            for r in sibling.probes
            if r is not q
            and r.status in (ProbeStatus.CHOSEN, ProbeStatus.LOST)
            and not r.stopped_early
            and r.label in here
            and precision_gate(r.placement.precision, published) is None
            and top < STOP_BELOW * yardstick(r)
        ),
        None,
    )
