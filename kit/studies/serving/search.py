"""Find the highest offered rate that passes: ramp to bracket it, then bisect.

Passing is assumed monotonic in the rate (a rate below a passing one passes), so probes only
ever narrow the bracket [highest pass, lowest fail]. `run(qps) -> Probe` is a LoadGen Server
run, the simulator, or a fake in the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kit.errors import InvalidParameter


@dataclass(kw_only=True)
class Probe:
    """One run at an offered rate: its p99, whether it passed, and LoadGen's own verdict."""

    qps: float
    p99_ms: float | None
    passed: bool
    valid: bool | None = None  # LoadGen's VALID/INVALID (None for the simulator)
    reasons: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SearchResult:
    best_qps: float | None  # highest passing rate probed; None if none passed
    best: Probe | None
    probes: list[Probe]
    stopped: str  # "converged", "upper bound", "none passed", "probe budget"

    def to_dict(self) -> dict:
        return {
            "best_qps": self.best_qps,
            "best": self.best.to_dict() if self.best else None,
            "probes": [p.to_dict() for p in self.probes],
            "stopped": self.stopped,
        }


def find_max_qps(
    run: Callable[[float], Probe],
    *,
    start_qps: float,
    upper_qps: float | None = None,
    min_qps: float | None = None,
    rel_tol: float = 0.05,
    max_probes: int = 8,
    growth: float = 2.0,
) -> SearchResult:
    """Bracket the highest passing rate from `start_qps` (x/÷ `growth`), then bisect to
    `rel_tol`."""
    if not start_qps > 0 or growth <= 1 or max_probes < 1 or rel_tol <= 0:
        raise InvalidParameter(
            "search",
            (start_qps, growth, max_probes, rel_tol),
            "start_qps > 0, growth > 1, max_probes >= 1, rel_tol > 0",
        )
    if upper_qps is not None:
        start_qps = min(start_qps, upper_qps)
    floor = min_qps if min_qps is not None else start_qps / growth**4
    probes: list[Probe] = []
    best: Probe | None = None
    fail: float | None = None
    q, stopped = start_qps, "probe budget"
    while len(probes) < max_probes:
        p = run(q)
        probes.append(p)
        if p.passed:
            best = p if best is None or q > best.qps else best
        else:
            fail = q if fail is None else min(fail, q)
        nxt, stopped = _next_rate(
            best.qps if best else None, fail, floor, upper_qps, rel_tol, growth
        )
        if nxt is None:
            break
        q = nxt
    else:
        stopped = "probe budget"
    return SearchResult(best.qps if best else None, best, probes, stopped)


def _next_rate(
    lo: float | None,
    hi: float | None,
    floor: float,
    upper: float | None,
    rel_tol: float,
    growth: float,
) -> tuple[float | None, str]:
    if lo is None:  # nothing passed yet: step down
        assert hi is not None  # a rate failed
        q = hi / growth
        return (q, "") if q >= floor else (None, "none passed")
    if hi is None:  # nothing failed yet: step up
        if upper is not None and lo >= upper:
            return None, "upper bound"
        q = lo * growth
        return (min(q, upper) if upper is not None else q), ""
    if (hi - lo) / lo <= rel_tol:
        return None, "converged"
    return (lo + hi) / 2, ""
