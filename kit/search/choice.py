"""Choosing a row's configuration from its probes: the runoff's winner, else the fastest measured
candidate whose interval lies above today's mapping's (a search never trades the mapping for noise),
with its ratio to today's mapping and every other probe's reason.
"""

from __future__ import annotations

from kit.search.decision import Decision, Plan
from kit.search.duels import Runoff
from kit.search.precision_map import PrecisionChoice
from kit.search.probe import Probe, ProbeStatus
from kit.search.wording import note, runoff_text


def choose(
    probes: list[Probe], published: str, today: PrecisionChoice, verdict: Runoff | None = None
) -> Decision:
    """The runoff's winner (`verdict`: the leader and the candidates close behind it timed side by
    side, kit.search.runoff); without one, the fastest measured candidate unless its interval
    overlaps today's mapping's (then today's stays). Every other probe gets its reason."""
    measured = [p for p in probes if p.status == ProbeStatus.MEASURED]
    today_probe = next((p for p in probes if p.today), None)
    if not measured:
        return _nothing_measured(probes, today_probe, today)
    best, kept_for_noise = _pick(measured, today_probe, verdict)
    for p in measured:
        _give_reason(p, best, kept_for_noise, verdict)
    ratio, ratio_iv, ratio_batch = duel_ratio(verdict, best, today_probe) or (
        *ratio_to(best, today_probe),
        None,
    )
    return Decision(
        chosen=best.label,
        today=today_probe.label if today_probe else None,
        plan=Plan(
            best.placement,
            precision_note=note(
                best,
                today_probe,
                today,
                published=published,
                ratio=ratio,
                measured=measured,
                probes=probes,
                ratio_batch=ratio_batch,
            ),
        ),
        ratio_vs_today=ratio,
        ratio_interval=ratio_iv,
        ratio_batch=ratio_batch,
        separated=bool(today_probe is None or best is today_probe or separated(best, today_probe)),
        probes=list(probes),
    )


def _nothing_measured(
    probes: list[Probe], today_probe: Probe | None, today: PrecisionChoice
) -> Decision:
    """Today's mapping kept: no candidate was measured (the pending ones were never probed)."""
    for p in probes:
        p.status = p.status if p.status != ProbeStatus.PENDING else ProbeStatus.NOT_PROBED
    label = today_probe.label if today_probe else None
    return Decision(
        chosen=label,
        today=label,
        fallback=True,
        probes=list(probes),
        plan=Plan(
            today.placement,
            precision_note=today.note
            + " (the per-row search measured no candidate: today's mapping kept)",
        ),
    )


def _pick(
    measured: list[Probe], today_probe: Probe | None, verdict: Runoff | None
) -> tuple[Probe, bool]:
    """(the chosen probe, whether today's mapping was kept because the fastest was not clearly
    faster): the runoff's winner where there was one."""
    if verdict:  # the side-by-side duels decide (kit.search.runoff)
        return next(p for p in measured if p.label == verdict.winner), False
    best = max(measured, key=lambda p: p.rate)
    if (
        today_probe is not None
        and today_probe.status == ProbeStatus.MEASURED
        and best is not today_probe
        and not clearly_faster(best, today_probe)
    ):
        return today_probe, True
    return best, False


def _give_reason(p: Probe, best: Probe, kept_for_noise: bool, verdict: Runoff | None) -> None:
    """A measured probe's status (chosen or lost) and the reason beside it."""
    p.status = ProbeStatus.CHOSEN if p is best else ProbeStatus.LOST
    taken = f"taken by {p.shared_from}" if p.shared_from else ""
    if p is best:
        p.reason = f"probe {taken}" if taken else p.reason
    elif kept_for_noise and p.rate > best.rate:
        p.reason = (
            "faster by its point estimate, but its interval reaches below today's "
            "mapping's throughput: today's mapping kept"
        )
    else:
        p.reason = (
            f"{p.rate / best.rate:.2f}x the chosen's throughput "
            f"(probe{', ' + taken if taken else ''})"
        )
    p.reason += runoff_text(verdict, p)


def duel_ratio(
    verdict: Runoff | None, best: Probe, today: Probe | None
) -> tuple[float, list, int | None] | None:
    """best ÷ today from their side-by-side duel (median, the lowest and highest round, and the
    batch where a settle measured it, else None), if they fought one: the last, so a near tie
    settled at the published batch speaks for it."""
    for d in reversed(verdict.duels if verdict else ()):
        if (
            today is None
            or best is today
            or d.failed
            or {d.leader, d.challenger} != {best.label, today.label}
        ):
            continue
        ratios = d.ratios_of(best.label)
        return d.ratio_of(best.label), [min(ratios), max(ratios)], d.batch
    return None


def clearly_faster(a: Probe, b: Probe) -> bool:
    """Whether a's whole interval lies above b's throughput (no interval: the point estimates)."""
    if a.low is None or a.low != a.low:
        return a.rate > b.rate
    return a.low > b.rate


def separated(a: Probe, b: Probe) -> bool:
    """Whether a's throughput interval lies wholly above b's (no interval: the point estimates)."""
    if a.low is None or a.low != a.low:
        return a.rate > b.rate
    return b.high is not None and a.low > b.high  # no upper bound on b: not separated


def ratio_to(best: Probe, today: Probe | None) -> tuple[float | None, list]:
    if (
        today is None
        or today.status not in (ProbeStatus.CHOSEN, ProbeStatus.LOST)
        or not today.throughput
    ):
        return None, [None, None]
    if best is today:
        return 1.0, [1.0, 1.0]
    lo = best.low / today.high if best.low and today.high else None
    hi = best.high / today.low if best.high and today.low else None
    return best.rate / today.rate, [lo, hi]
