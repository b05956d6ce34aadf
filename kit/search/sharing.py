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
from kit.search.gate import bits
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
    "first_call",
    "numerics",
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


def borrow(probes: list[Probe], sibling: Decision) -> int:
    """Fill each pending probe of 16 bits or more (today's mapping aside) that the sibling measured;
    returns how many were taken."""
    theirs = {p.label: p for p in sibling.probes}
    source = (
        f"the {sibling.published} row's search ({sibling.cache_file or '?'}, "
        f"{sibling.created_at or '?'})"
    )
    taken = 0
    for p in probes:
        q = theirs.get(p.label)
        if p.status != ProbeStatus.PENDING or not shareable(p) or q is None:
            continue
        if q.status not in (ProbeStatus.CHOSEN, ProbeStatus.LOST) or not q.throughput:
            continue
        for name in COPIED:
            setattr(p, name, getattr(q, name))
        p.shared_from = q.shared_from or source  # where it was measured, if the sibling took it too
        if q.reason.startswith("stopped early"):
            p.status, p.reason = ProbeStatus.LOST, f"in {p.shared_from}: {q.reason}"
        else:
            p.status = ProbeStatus.MEASURED
        taken += 1
    return taken
