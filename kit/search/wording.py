"""Wording a row's search for the reports: the precision note of the chosen configuration (what
won, its ratio to today's mapping, why a higher precision stands in for the published one) and what
the side-by-side duels said about each probe.
"""

from __future__ import annotations

from kit.precision import PublishedPrecision
from kit.search.duels import Runoff
from kit.search.gate import bits
from kit.search.precision_map import PrecisionChoice
from kit.search.probe import Probe, ProbeStatus


def runoff_text(verdict: Runoff | None, p: Probe) -> str:
    """What the side-by-side duels said about `p` ('' where it fought none)."""
    if verdict is None:
        return ""
    parts = []
    for d in verdict.duels_of(p.label):
        other = d.other(p.label)
        if d.failed:
            parts.append(f"runoff with {other} failed: {d.error}")
            continue
        at = f" at batch {d.batch}, settling a close duel" if d.batch else ""
        rounds = f"median of {d.rounds} alternating rounds" if d.rounds > 1 else "one round"
        parts.append(f"side by side with {other}{at}: {d.ratio_of(p.label):.2f}x ({rounds})")
    parts += [u.text for u in verdict.unsettled if p.label in u.pair]
    if not parts:
        return ""
    return ("; " if p.reason else "") + "; ".join(parts)


def note(
    best: Probe,
    today_probe: Probe | None,
    today: PrecisionChoice,
    *,
    published: str,
    ratio: float | None,
    measured: list[Probe],
    probes: list[Probe],
    ratio_batch: int | None = None,
) -> str:
    """The precision note a report prints for the chosen configuration: what won, its ratio to
    today's mapping, and, where a higher precision stands in for the published one, both
    throughputs against the best candidate of the published class (or why none was measured)."""
    head = f"chosen by the per-row search: {best.label}, " + (
        f"the fastest of {len(measured)} measured candidates within numerics tolerance"
        if len(measured) > 1
        else "the only candidate measured within numerics tolerance (the others: not eligible, not "
        "probed at this depth, or failed)"
    )
    if ratio is not None and today_probe is not None and best is not today_probe:
        head += f", {ratio:.2f}x today's mapping ({today_probe.label})" + (
            f" at batch {ratio_batch}, where a close duel at the search's batch was settled"
            if ratio_batch
            else ""
        )
    elif best is today_probe:
        head += " (today's mapping)"
    published = PublishedPrecision.parse(published)
    want = published.bits
    if bits(best.placement.precision) > want:
        same = [p for p in measured if bits(p.placement.precision) == want]
        top = max(same, key=lambda p: p.rate) if same else None
        why = f"; {best.placement.precision} stands in for {published}: " + (
            f"faster here ({best.throughput:.3g} vs {top.throughput:.3g} samples/s, "
            f"{best.rate / top.rate:.2f}x the best {published}-class candidate, {top.label})"
            if top
            else f"no {published}-class candidate was measured here ("
            + unmeasured([p for p in probes if bits(p.placement.precision) == want])
            + ")"
        )
    elif (
        best.placement.precision == today.placement.precision
        and best.placement.backend == today.placement.backend
    ):
        why = f"; {today.note}"
    else:
        why = (
            f"; IPU {published} -> {best.placement.precision} "
            f"({'native' if best.native else 'emulated'} here)"
        )
    return head[0].upper() + head[1:] + why


def unmeasured(same_class: list[Probe]) -> str:
    """Why none of the published class's candidates has a throughput: each one's status, or that
    every one is an emulated 16-bit type left to a full search (kit.search.planning.plan_probes)."""
    if not same_class:
        return "none runs on this hardware"
    if all(
        p.status == ProbeStatus.NOT_PROBED and not p.native and bits(p.placement.precision) == 16
        for p in same_class
    ):
        return (
            "each is emulated on this hardware, fp32 arithmetic with conversions around it, and a "
            f"quick search leaves them to a full search: {', '.join(p.label for p in same_class)}"
        )
    return ", ".join(f"{p.label}: {p.status}" for p in same_class)
