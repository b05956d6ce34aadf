"""Where a run's time went: the wall seconds of each phase (export, search, compile, numerics,
timing, accuracy, ...), kept in the result beside the figures, so a slow row says which phase was
slow. A full resnet50 row on an H200 ran past 217 s with 38 s of it known (the search): the rest
could not be told apart from the result (issue 43).

Phases are timed around whole steps, never inside a timed window: the account adds two clock reads
per phase.

A study marks its phases with `phase(...)`; `kit.studies.base.run_study` opens the account around
the study (`accounting()`) and keeps it in the result as its `time_account` table, also when the
study fails. Outside an account, `phase` times nothing.

>>> with accounting() as account:
...     with phase("export"):
...         pass
>>> [p.phase for p in account.phases], account.to_dict()["total_s"] >= 0
(['export'], True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kit.errors import InvalidParameter

if TYPE_CHECKING:
    from kit.measure.window import BatchMeasurement, MeasureConfig

#: The phases a study names, in the order a run meets them; "other" is what no phase covered.
PHASES = (
    "export",
    "search",
    "compile",
    "numerics",
    "timing",
    "op breakdown",
    "accuracy",
    "roofline",
)


@dataclass
class PhaseTime:
    """One phase's wall seconds; `batch_size` where it belongs to one, `detail` what it did."""

    phase: str
    seconds: float
    batch_size: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise InvalidParameter("phase", self.phase, f"one of {', '.join(PHASES)}")


@dataclass
class TimeAccount:
    """The phases of one run, and its clock from creation to `to_dict`."""

    clock: Callable[[], float] = time.perf_counter
    phases: list[PhaseTime] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @contextmanager
    def phase(
        self, name: str, batch_size: int | None = None, detail: str = ""
    ) -> Iterator[PhaseTime]:
        """Time the block as phase `name`; the yielded record's `detail` may be filled in inside it.
        A block that raises is still counted (its detail says so)."""
        # an unknown name is refused before the block runs
        record = PhaseTime(name, 0.0, batch_size, detail)
        start = self.clock()
        try:
            yield record
        except BaseException:
            record.detail = (
                f"{record.detail}; stopped by an error" if record.detail else "stopped by an error"
            )
            raise
        finally:
            record.seconds = self.clock() - start
            self.phases.append(record)

    def to_dict(self) -> dict:
        """The phases (seconds rounded to 0.01), the run's total and the seconds no phase
        covered."""
        total = self.clock() - self.started
        covered = sum(p.seconds for p in self.phases)
        return {
            "total_s": round(total, 2),
            "other_s": round(max(total - covered, 0.0), 2),
            "phases": [asdict(p) | {"seconds": round(p.seconds, 2)} for p in self.phases],
        }


_current: ContextVar[TimeAccount | None] = ContextVar("kit_time_account", default=None)


@contextmanager
def accounting() -> Iterator[TimeAccount]:
    """A new account that `phase` records into until the block ends."""
    account = TimeAccount()
    token = _current.set(account)
    try:
        yield account
    finally:
        _current.reset(token)


@contextmanager
def phase(name: str, batch_size: int | None = None, detail: str = "") -> Iterator[PhaseTime]:
    """Time the block as phase `name` of the open account (none open: only checks the name)."""
    account = _current.get()
    if account is None:
        yield PhaseTime(name, 0.0, batch_size, detail)
        return
    with account.phase(name, batch_size, detail) as record:
        yield record


def by_phase(account: Mapping[str, Any]) -> dict[str, float]:
    """A stored account's seconds summed by phase, in PHASES order, with 'other' last; {} for none.

    >>> by_phase({"total_s": 5, "other_s": 1, "phases": [{"phase": "timing", "seconds": 3},
    ...          {"phase": "export", "seconds": 0.5}, {"phase": "timing", "seconds": 0.5}]})
    {'export': 0.5, 'timing': 3.5, 'other': 1}
    """
    if not account or not account.get("phases"):
        return {}
    sums: dict[str, float] = {}
    for p in account["phases"]:
        sums[p["phase"]] = sums.get(p["phase"], 0.0) + (p.get("seconds") or 0.0)
    known = {name: sums.pop(name) for name in PHASES if name in sums}
    # a newer kit's phases after ours
    return known | sums | {"other": account.get("other_s") or 0.0}


def timing_detail(measurement: BatchMeasurement, cfg: MeasureConfig, warmed_by: str = "") -> str:
    """What a timing phase spent its seconds on: the timed calls, why they stopped and the limit
    they ran under (raised where the window was stretched for the power sensor), the warm-up calls
    (`warmed_by`: a call made before them that warmed the session too)."""
    precision = measurement.precision or {}
    stopped = precision.get("stopped_by") or "minimums met"
    limit = precision.get("limit_s", cfg.max_duration_s)
    warm = f"{cfg.warmup} warm-up call{'s' if cfg.warmup != 1 else ''}" + (
        f" after {warmed_by}" if warmed_by else ""
    )
    return (
        f"{measurement.wall_time_s:.1f} s timed ({measurement.latency.count} calls, stopped by "
        f"{stopped}; limit {limit:g} s), {warm}"
    )
