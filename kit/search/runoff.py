"""The runoff: when the fastest candidate's probe interval overlaps today's mapping's throughput (a
close call, or a probe hit by other work on a shared machine), both are loaded side by side and
timed in alternating rounds; the per-round ratio decides, not two probes taken at different times.

>>> RUNOFF_ROUNDS
4
"""

from __future__ import annotations

import statistics

from kit.backends import BackendConfig, require_backend
from kit.measure.window import MeasureConfig
from kit.models.spec import ExportedModel
from kit.search.probe import Probe, release, time_session

RUNOFF_ROUNDS = 4  # alternating rounds, each probe_s / 2 per side


def contender(probes: list[Probe], clearly_faster) -> tuple[Probe, Probe] | None:
    """(challenger, today's probe) when the fastest measured candidate is not today's mapping and
    not clearly faster than it; else None."""
    measured = [p for p in probes if p.status == "measured"]
    today = next((p for p in measured if p.today), None)
    if not measured or today is None:
        return None
    best = max(measured, key=lambda p: p.throughput)
    if best is today or clearly_faster(best, today):
        return None
    return best, today


def run(model: ExportedModel, pair: tuple[Probe, Probe], inputs: dict, batch: int, mcfg: MeasureConfig) -> dict:
    """Both loaded, RUNOFF_ROUNDS alternating rounds; {'challenger', 'ratios', 'median'} (challenger ÷
    today per round), or {'challenger', 'error'} when either fails to load or run."""
    challenger, today = pair
    cfg = MeasureConfig(warmup=1, min_duration_s=mcfg.min_duration_s / 2, min_count=2)
    sessions = []
    try:
        for p in pair:
            sessions.append(require_backend(p.backend).load(
                model, BackendConfig(p.precision, p.device, p.threads, dict(p.options)), batch))
        ratios = []
        for r in range(RUNOFF_ROUNDS):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            thr = {i: time_session(sessions[i], inputs, batch, cfg).throughput for i in order}
            ratios.append(thr[0] / thr[1])
    except Exception as exc:  # noqa: BLE001 - a failed runoff keeps today's mapping, with the reason
        return {"challenger": challenger.label, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        for s in sessions:
            s.close()
        sessions.clear()
        release()
    return {"challenger": challenger.label, "today": today.label, "ratios": [round(x, 4) for x in ratios],
            "median": statistics.median(ratios)}
