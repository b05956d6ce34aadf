"""The runoff: the search's leader (the fastest probe) against the candidates close behind it and
today's mapping, each pair loaded side by side and timed in alternating rounds; the per-round ratio
decides, not probes taken at different moments. On a shared machine (load average several times
the cores) one candidate's probe can run 2-3x faster or slower than another's for no reason of its
own: a single probe per candidate then picks the luckiest, not the fastest.

Duels: the leader against today's mapping and the other candidates whose probe came within the
window of the leader's throughput (RUNOFF_WITHIN on a contended machine, where probes swing 3.5x;
QUIET_WITHIN on a quiet one, as an idle half-second at the search's start finds it (other
processes' load and CPU steal under kit.measure.noise's thresholds), where a probe below 0.7x the
leader does not win a rematch, nor one whose whole interval lies below the leader's), at most
MAX_DUELS in all; a challenger whose median per-round ratio to the leader exceeds 1 becomes the
leader for the next duel (king of the hill).

A duel runs RUNOFF_ROUNDS rounds (each side timed for half a probe, one call at least: a long
call is a round on its own, so a duel costs time, not calls), then goes on while it is undecided,
up to MAX_RUNOFF_ROUNDS and while it has taken under EXTEND_WITHIN_S: undecided means the 95 %
t-interval of the mean log ratio still allows the side its median puts behind to be more than
TIE_TOLERANCE faster (the peer benchmark's 0.95 bar), so a pick that could cost more than that gets
more rounds, and a near tie, where either pick costs less, gets no more than the cap. Roformer's
duel at batch 1 on a 2-core Xeon went 3:1 for ONNX Runtime (0.89, 0.81, 0.99, 1.02 for OpenVINO)
where the pair measured again ran OpenVINO 1.09x over 12 rounds and 1.18x at batch 12; an even split
(1.02, 1.22, 0.92, 0.93) kept the slower one before.

A near tie at a quick search's small batch (medians within TIE_TOLERANCE after RUNOFF_ROUNDS) is
settled at the row's largest published batch, where it runs, when one round there is predicted (from
the probes' throughput and load times) to take at most SETTLE_WITHIN_S: rounds of one call per side,
no warm-up call (each side's first call at that batch is in its first round), while undecided and
the next round fits. Roformer's pair is a near tie at batch 1 (OpenVINO ÷ ONNX Runtime medians 0.99,
1.03 and 1.06 in three searches) and OpenVINO 1.15-1.21x in every round at batch 12.

Where the published batch is FAR_BATCH_RATIO times the search batch or more, a ratio at the search
batch says little about the published one, so "near" widens to FAR_TIE_TOLERANCE and the probes'
intervals no longer settle a challenger on a quiet machine (`below`): every challenger within the
window is dueled, and one within FAR_TIE_TOLERANCE is settled at the published batch, or, where a
round there does not fit SETTLE_WITHIN_S, at the largest batch where two rounds fit if that is far
from the search batch too (`settle_point`). Bert FP16 at batch 40 on a 2-core EPYC: a round predicted at
61 s, so its batch-1 duel (ONNX Runtime 1.27x) stood and the row ran 0.87x OpenVINO f32 [0.86,
0.90] in `make bench-peers`; OpenVINO ÷ ONNX Runtime, measured there in single calls, was 0.83-0.96
at batch 1, 0.83-1.45 at 4, 0.89-1.10 at 8, 1.20-1.28 at 16 and 1.07-1.11 at 28; a settle at 29,
one round, gave ONNX Runtime 1.02x: hence two rounds, at 13. On a 2-core
EPYC, bert FP16's ONNX Runtime ÷ OpenVINO went from 1.04 at batch 1 to 0.89 at batch 40 in one bare
search, and three BERT-family searches' batch-1 duels and probes favoured ONNX Runtime by 11-29 %
where OpenVINO ran 1.06-1.11x at batch 40: each kept ONNX Runtime, 0.90-0.94x the best peer.

>>> RUNOFF_ROUNDS, MAX_RUNOFF_ROUNDS, MAX_DUELS, window(contended=False), window(contended=True)
(4, 8, 2, 0.7, 0.2)
>>> tie_tolerance(1, 40), tie_tolerance(1, 4), tie_tolerance(4, 32), tie_tolerance(1, None)
(0.3, 0.05, 0.3, 0.05)
>>> undecided([0.89, 0.81, 0.99, 1.02]), undecided([0.918, 0.975, 0.79, 0.89]), undecided([1.0, 1.0, 1.0])
(True, False, False)
"""  # noqa: E501

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scipy.stats import t as student_t

from kit.backends import require_backend
from kit.measure.window import MeasureConfig
from kit.models.spec import ExportedModel
from kit.search.context import SearchContext
from kit.search.duels import Duel, Runoff, Unsettled
from kit.search.probe import Probe, ProbeStatus, release, time_session

RUNOFF_ROUNDS = 4  # alternating rounds, each probe_s / 2 per side
MAX_RUNOFF_ROUNDS = 8  # an undecided duel goes on up to this many rounds
# ... and only while it has taken less than this (videobert's 4 rounds: about 31 s)
EXTEND_WITHIN_S = 25.0
TIE_TOLERANCE = 0.05  # a pick is settled once the other side cannot be more than this much faster
# a near tie is settled at the published batch when one round there fits this
SETTLE_WITHIN_S = 45.0
# contended: challengers at this fraction of the leader's throughput or more (3.5x swings seen)
RUNOFF_WITHIN = 0.2
QUIET_WITHIN = 0.7  # quiet: the early stop's threshold (kit.search.measuring.STOP_BELOW)
MAX_DUELS = 2
# a settle batch this many times the search batch or more: the search batch's ratio is a weak guide
FAR_BATCH_RATIO = 8
FAR_TIE_TOLERANCE = 0.3  # ... so a duel within this is settled there (see the module's text)


def far(batch: int, settle_batch: int | None) -> bool:
    """Whether the settle batch is FAR_BATCH_RATIO times the search batch or more."""
    return settle_batch is not None and settle_batch >= FAR_BATCH_RATIO * batch


def tie_tolerance(batch: int, settle_batch: int | None) -> float:
    """How close a duel at `batch` must be to be settled at `settle_batch`."""
    return FAR_TIE_TOLERANCE if far(batch, settle_batch) else TIE_TOLERANCE


def window(contended: bool) -> float:
    """The fraction of the leader's probe throughput a challenger's must reach to be dueled."""
    return RUNOFF_WITHIN if contended else QUIET_WITHIN


def below(p: Probe, leader: Probe) -> bool:
    """Whether p's whole throughput interval lies below the leader's (no interval: never)."""
    return (
        p.high is not None and leader.low is not None and p.high == p.high and p.high < leader.low
    )


def challengers(
    probes: list[Probe], within: float = RUNOFF_WITHIN, *, probes_settle: bool = True
) -> tuple[Probe | None, list[Probe]]:
    """(the leader, the candidates it duels in order): today's mapping first, then the fastest
    others; each within `within` x the leader's throughput, and on a quiet machine (the narrow
    window), where `probes_settle`, not settled by the probes already (its interval wholly below
    the leader's)."""
    measured = sorted(
        (p for p in probes if p.status == ProbeStatus.MEASURED), key=lambda p: -p.rate
    )
    if len(measured) < 2:
        return (measured[0] if measured else None), []
    leader = measured[0]
    quiet = within >= QUIET_WITHIN and probes_settle
    close = [
        p
        for p in measured[1:]
        if p.rate >= within * leader.rate and not (quiet and below(p, leader))
    ]
    # today's mapping first: every decision states its ratio to it
    close.sort(key=lambda p: not p.today)
    return leader, close[:MAX_DUELS]


def undecided(ratios: list[float]) -> bool:
    """Whether the rounds so far (challenger ÷ leader) still allow the side their median puts behind
    to be more than TIE_TOLERANCE faster: the 95 % t-interval of the mean log ratio reaches that far
    (fewer than two rounds: undecided)."""
    n = len(ratios)
    if n < 2:
        return True
    logs = [math.log(r) for r in ratios]
    ahead = statistics.mean(logs) * (1 if statistics.median(ratios) > 1.0 else -1)
    half = student_t.ppf(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return bool(half - ahead > -math.log(1 - TIE_TOLERANCE))


def duel(
    ctx: SearchContext,
    leader: Probe,
    challenger: Probe,
    *,
    settles_ties: bool = False,
    tolerance: float = TIE_TOLERANCE,
) -> Duel:
    """Both loaded, one warm-up call each, RUNOFF_ROUNDS alternating rounds (more while undecided):
    the Duel, with its `error` when either fails to load or run. `settles_ties`: a duel within
    `tolerance` after RUNOFF_ROUNDS stops here (a larger batch settles it). A session the
    context's keeper holds at this batch is lent, not loaded again."""

    def go_on(ratios: list[float], seconds: float) -> bool:
        return len(ratios) < RUNOFF_ROUNDS or (
            not (settles_ties and near_tie(ratios, tolerance)) and extend(ratios, seconds)
        )

    cfg = MeasureConfig(warmup=0, min_duration_s=ctx.window.min_duration_s / 2, min_count=1)
    return timed_rounds(
        ctx.model,
        (leader, challenger),
        ctx.inputs,
        ctx.batch,
        cfg,
        go_on,
        warm_up=True,
        lent=ctx.keeper.lend,
    )


def timed_rounds(
    model: ExportedModel,
    pair: tuple[Probe, Probe],
    inputs: dict,
    batch: int,
    cfg: MeasureConfig,
    go_on: Callable[[list[float], float], bool],
    *,
    warm_up: bool,
    lent: Callable[[int, Probe], object] | None = None,
    settle_batch: int | None = None,
) -> Duel:
    """The pair loaded side by side at `batch` (with a warm-up call each, if asked), then
    alternating rounds while go_on(ratios so far, seconds since the first load); both closed however
    it ends, except a session `lent(batch, probe)` gave (its owner closes it). `settle_batch`: the
    Duel's `batch` (a settle's)."""
    sides = Duel(leader=pair[0].label, challenger=pair[1].label, batch=settle_batch)
    sessions: list[Any] = []
    ratios: list[float] = []
    started, borrowed = time.perf_counter(), set()
    try:
        for p in pair:
            session = lent(batch, p) if lent is not None else None
            if session is None:
                session = require_backend(p.placement.backend).load(
                    model, p.backend_config(), batch
                )
            else:
                borrowed.add(id(session))
            sessions.append(session)
            if warm_up:
                sessions[-1].run(inputs)  # before the first round, not one per round
        while go_on(ratios, time.perf_counter() - started):
            order = (0, 1) if len(ratios) % 2 == 0 else (1, 0)
            thr = {i: time_session(sessions[i], inputs, batch, cfg).throughput for i in order}
            ratios.append(thr[1] / thr[0])
    except Exception as exc:  # noqa: BLE001
        # a failed duel leaves the leader in place, with the reason
        return replace(sides, error=f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        for s in sessions:
            if id(s) not in borrowed:
                s.close()
        sessions.clear()
        release()
    return replace(
        sides,
        ratios=tuple(round(x, 4) for x in ratios),
        median=statistics.median(ratios),
        seconds=round(time.perf_counter() - started, 1),
    )


def near_tie(ratios: list[float], tolerance: float = TIE_TOLERANCE) -> bool:
    """Whether the rounds' median puts the pair within `tolerance` of each other."""
    return abs(math.log(statistics.median(ratios))) < -math.log(1 - tolerance)


def settle_cost(leader: Probe, challenger: Probe, batch: int) -> float:
    """Seconds one round at `batch` is predicted to take with both loads: from each probe's
    throughput at the search batch and its load time (none recorded, as for a probe taken from a
    sibling row: 0)."""
    return sum((p.load_s or 0.0) + batch / p.rate for p in (leader, challenger))


def settle_point(leader: Probe, challenger: Probe, batch: int, settle_batch: int) -> int | None:
    """The batch a close duel at `batch` is settled at: `settle_batch` where one round there is
    predicted to fit SETTLE_WITHIN_S; else, where that batch is far, the largest batch below it at
    which two rounds fit (one round is a single call a side, a coin toss on a noisy machine), as
    long as it is far from the search batch too (FAR_BATCH_RATIO times it); else None. The probes'
    throughput at the search batch predicts a round; each side's first call at the new batch is
    cold, so a round can overrun it (bert FP16: 54 s for 45 predicted).

    >>> from kit.backends import Placement
    >>> def probe(rate):  # bert FP16's pair at batch 1 on a 2-core EPYC
    ...     return Probe(label="p", placement=Placement("onnxruntime", "fp32"), native=True, why="",
    ...                  throughput=rate, load_s=1.5)
    >>> ort, ov = probe(1.31), probe(1.44)
    >>> settle_point(ort, ov, 1, 12), settle_point(ort, ov, 1, 40), settle_point(ort, ov, 4, 40)
    (12, 13, None)
    """
    if settle_cost(leader, challenger, settle_batch) <= SETTLE_WITHIN_S:
        return settle_batch
    loads = (leader.load_s or 0.0) + (challenger.load_s or 0.0)
    per_sample = 1 / leader.rate + 1 / challenger.rate
    fits = (SETTLE_WITHIN_S / 2 - loads) / per_sample
    return math.floor(fits) if math.isfinite(fits) and far(batch, math.floor(fits)) else None


def settle(
    model: ExportedModel, leader: Probe, challenger: Probe, batch: int, seed: int = 0
) -> Duel:
    """The pair at `batch`: rounds of one call per side (alternating, no warm-up call) while
    undecided, up to RUNOFF_ROUNDS, and while the next round is predicted to end within
    SETTLE_WITHIN_S; the Duel, with its `batch`."""

    def go_on(ratios: list[float], seconds: float) -> bool:
        return not ratios or (
            len(ratios) < RUNOFF_ROUNDS
            and undecided(ratios)
            and seconds * (1 + 1 / len(ratios)) <= SETTLE_WITHIN_S
        )

    try:
        inputs = model.make_inputs(batch, seed=seed)
    except Exception as exc:  # noqa: BLE001
        # no settle: the small batch's verdict stands, with the reason
        return Duel(
            leader=leader.label,
            challenger=challenger.label,
            batch=batch,
            error=f"{type(exc).__name__}: {str(exc)[:200]}",
        )
    cfg = MeasureConfig(warmup=0, min_duration_s=0.0, min_count=1)
    return timed_rounds(
        model, (leader, challenger), inputs, batch, cfg, go_on, warm_up=False, settle_batch=batch
    )


def extend(ratios: list[float], seconds: float) -> bool:
    """Whether a duel past its first rounds runs another: undecided, under the cap and the time."""
    return len(ratios) < MAX_RUNOFF_ROUNDS and seconds < EXTEND_WITHIN_S and undecided(ratios)


def run(
    ctx: SearchContext,
    probes: list[Probe],
    *,
    within: float = RUNOFF_WITHIN,
    settle_batch: int | None = None,
    seed: int = 0,
) -> Runoff | None:
    """The duels and the winner; None where there is nothing to duel (one candidate measured, or
    none close to the leader). A duel within tie_tolerance(batch, settle_batch) is settled at
    `settle_batch` (larger than `batch`) where that fits (its Duel follows the duel's, with its
    `batch`), else the verdict says why not (`unsettled`)."""
    batch = ctx.batch
    leader, rivals = challengers(probes, within, probes_settle=not far(batch, settle_batch))
    if not rivals or leader is None:
        return None
    tolerance = tie_tolerance(batch, settle_batch)
    duels: list[Duel] = []
    notes: list[Unsettled] = []
    for rival in rivals:
        larger = settle_batch if settle_batch and settle_batch > batch else None
        at = settle_point(leader, rival, batch, larger) if larger else None
        d = duel(ctx, leader, rival, settles_ties=at is not None, tolerance=tolerance)
        duels.append(d)
        if larger and not d.failed and near_tie(list(d.ratios), tolerance):
            if at is not None:
                settled = settle(ctx.model, leader, rival, at, seed)
                duels.append(settled)
                d = settled if not settled.failed else d
            else:
                cost = settle_cost(leader, rival, larger)
                notes.append(
                    Unsettled(
                        (leader.label, rival.label),
                        f"a close duel at batch {batch}, not settled at batch {larger}: one "
                        f"round there predicted at {cost:.0f} s, over {SETTLE_WITHIN_S:.0f} s"
                        + (
                            f", nor at a batch {FAR_BATCH_RATIO}x the search's"
                            if far(batch, larger)
                            else ""
                        ),
                    )
                )
        if d.challenger_won:
            leader = rival
    return Runoff(winner=leader.label, duels=tuple(duels), within=within, unsettled=tuple(notes))
