"""The runoff: the search's leader (the fastest probe) against the candidates close behind it and
today's mapping, each pair loaded side by side and timed in alternating rounds; the per-round ratio
decides, not probes taken at different moments. On a shared machine (load average several times
the cores) one candidate's probe can run 2-3x faster or slower than another's for no reason of its
own: a single probe per candidate then picks the luckiest, not the fastest.

Duels: the leader against today's mapping and the other candidates whose probe came within the
window of the leader's throughput (RUNOFF_WITHIN on a contended machine, where probes swing 3.5x;
QUIET_WITHIN on a quiet one, as an idle half-second at the search's start finds it (other
processes' load and CPU steal under kit.measure.noise's thresholds), where a probe below 0.7x the leader does not win a rematch, nor one
whose whole interval lies below the leader's), at most MAX_DUELS in all; a challenger whose median per-round ratio to the leader exceeds 1 becomes the
leader for the next duel (king of the hill).

A duel runs RUNOFF_ROUNDS rounds, then goes on while it is undecided (the challenger faster in as
many rounds as not, or one more or fewer: 2 of 4, 2 or 3 of 5), up to MAX_RUNOFF_ROUNDS: roformer's
duel at batch 1 on a 2-core Xeon split 2:2 (median 0.98) where the pair measured again ran 1.10-1.14
in every round, and the row kept the slower candidate.

>>> RUNOFF_ROUNDS, MAX_RUNOFF_ROUNDS, MAX_DUELS, window(contended=False), window(contended=True)
(4, 8, 2, 0.7, 0.2)
>>> undecided([1.02, 1.22, 0.92, 0.93]), undecided([1.15, 1.09, 1.06, 0.88])
(True, False)
"""

from __future__ import annotations

import statistics

from kit.backends import require_backend
from kit.measure.window import MeasureConfig
from kit.models.spec import ExportedModel
from kit.search.probe import Probe, release, time_session

RUNOFF_ROUNDS = 4  # alternating rounds, each probe_s / 2 per side
MAX_RUNOFF_ROUNDS = 8  # an undecided duel goes on up to this many rounds
RUNOFF_WITHIN = 0.2  # contended: challengers at this fraction of the leader's throughput or more (3.5x swings seen)
QUIET_WITHIN = 0.7  # quiet: the early stop's threshold (kit.search.row.STOP_BELOW)
MAX_DUELS = 2


def window(contended: bool) -> float:
    """The fraction of the leader's probe throughput a challenger's must reach to be dueled."""
    return RUNOFF_WITHIN if contended else QUIET_WITHIN


def below(p: Probe, leader: Probe) -> bool:
    """Whether p's whole throughput interval lies below the leader's (no interval: never)."""
    return p.high is not None and leader.low is not None and p.high == p.high and p.high < leader.low


def challengers(probes: list[Probe], within: float = RUNOFF_WITHIN) -> tuple[Probe | None, list[Probe]]:
    """(the leader, the candidates it duels in order): today's mapping first, then the fastest
    others; each within `within` x the leader's throughput, and on a quiet machine (the narrow
    window) not settled by the probes already (its interval wholly below the leader's)."""
    measured = sorted((p for p in probes if p.status == "measured"), key=lambda p: -p.throughput)
    if len(measured) < 2:
        return (measured[0] if measured else None), []
    leader = measured[0]
    quiet = within >= QUIET_WITHIN
    close = [p for p in measured[1:] if p.throughput >= within * leader.throughput and not (quiet and below(p, leader))]
    close.sort(key=lambda p: not p.today)  # today's mapping first: every decision states its ratio to it
    return leader, close[:MAX_DUELS]


def undecided(ratios: list[float]) -> bool:
    """Whether the rounds so far split evenly: the challenger faster in as many rounds as not, or one
    more or fewer (the median then rests on the one or two rounds in the middle)."""
    faster = sum(r > 1.0 for r in ratios)
    return abs(2 * faster - len(ratios)) <= 1


def duel(model: ExportedModel, leader: Probe, challenger: Probe, inputs: dict, batch: int,
         mcfg: MeasureConfig) -> dict:
    """Both loaded, RUNOFF_ROUNDS alternating rounds (more while undecided): {'leader', 'challenger', 'ratios' (challenger ÷
    leader per round), 'median'} or with 'error' when either fails to load or run."""
    cfg = MeasureConfig(warmup=0, min_duration_s=mcfg.min_duration_s / 2, min_count=2)
    out = {"leader": leader.label, "challenger": challenger.label}
    sessions = []
    try:
        for p in (leader, challenger):
            sessions.append(require_backend(p.backend).load(model, p.backend_config(), batch))
            sessions[-1].run(inputs)  # one warm-up call each, before the first round (not one per round)
        ratios = []
        while len(ratios) < RUNOFF_ROUNDS or (len(ratios) < MAX_RUNOFF_ROUNDS and undecided(ratios)):
            order = (0, 1) if len(ratios) % 2 == 0 else (1, 0)
            thr = {i: time_session(sessions[i], inputs, batch, cfg).throughput for i in order}
            ratios.append(thr[1] / thr[0])
    except Exception as exc:  # noqa: BLE001 - a failed duel leaves the leader in place, with the reason
        return {**out, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        for s in sessions:
            s.close()
        sessions.clear()
        release()
    return {**out, "ratios": [round(x, 4) for x in ratios], "median": statistics.median(ratios)}


def run(model: ExportedModel, probes: list[Probe], inputs: dict, batch: int, mcfg: MeasureConfig,
        within: float = RUNOFF_WITHIN) -> dict | None:
    """The duels and the winner: {'winner': label, 'duels': [...], 'within': the window}; None where
    there is nothing to duel (one candidate measured, or none close to the leader)."""
    leader, rivals = challengers(probes, within)
    if not rivals:
        return None
    duels = []
    for rival in rivals:
        d = duel(model, leader, rival, inputs, batch, mcfg)
        duels.append(d)
        if d.get("median", 0) > 1.0:
            leader = rival
    return {"winner": leader.label, "duels": duels, "within": within}
