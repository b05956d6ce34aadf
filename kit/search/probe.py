"""One candidate measured for a row: its numerics against the fp32 reference and its throughput,
with an interval, through the kit's own timed window.

The interval is the normal approximation of the mean call time over the probe's calls (Student t
for few calls), turned into samples/s. It is the slot where the kit's own interval
(kit.measure.stats) goes once it exists: `throughput_interval` is the only function that computes
it.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy.stats import t as student_t

from kit.backends import BackendConfig, Placement
from kit.backends.placement import flat_dict, unflat_dict
from kit.errors import KitError, parse_member
from kit.measure.numerics import NumericDiff
from kit.measure.window import BatchMeasurement, MeasureConfig


class ProbeStatus(StrEnum):
    """Where a candidate stands in a row's search; the value is what the cache and results hold."""

    PENDING = "pending"  # to be measured
    FALLBACK = "fallback"  # measured only where the candidate it stands in for fails
    MEASURED = "measured"  # timed, not yet compared
    CHOSEN = "chosen"
    LOST = "lost"
    NOT_ELIGIBLE = "not eligible"
    NOT_PROBED = "not probed"
    FAILED = "failed"
    FAILED_NUMERICS = "failed numerics"

    @classmethod
    def parse(cls, value: str) -> ProbeStatus:
        """The member `value` names; else UnknownValueError naming the allowed ones."""
        return parse_member(cls, value, "probe status")


#: where a finished search leaves each probe
STATUSES = (
    ProbeStatus.CHOSEN,
    ProbeStatus.LOST,
    ProbeStatus.NOT_ELIGIBLE,
    ProbeStatus.FAILED_NUMERICS,
    ProbeStatus.FAILED,
    ProbeStatus.NOT_PROBED,
)
#: what makes a quick search measure a fallback
FAILED = (ProbeStatus.FAILED_NUMERICS, ProbeStatus.FAILED, ProbeStatus.NOT_PROBED)


@dataclass(kw_only=True)
class Probe:
    """What the search learnt about one candidate; `status` is one of STATUSES, `reason` says
    why."""

    label: str
    placement: Placement  # what runs where; flat in the JSON (`to_dict`), as the candidate's
    native: bool
    why: str
    today: bool = False  # the published-precision mapping's own configuration
    fallback_for: str = ""  # quick: measured only where the candidate of this label fails
    shared_from: str = ""  # the sibling row's search whose figures these are (kit.search.sharing)
    status: ProbeStatus = ProbeStatus.NOT_PROBED
    reason: str = ""
    throughput: float | None = None  # samples/s
    low: float | None = None  # 95 % interval of the throughput
    high: float | None = None
    calls: int = 0
    load_s: float | None = None
    # of load_s, compiling (torch.compile) or building a TensorRT engine; None where neither ran
    compile_s: float | None = None
    # its graphs from inductor's FX graph cache: {'hit': n, 'miss': n, 'bypass': n}
    compile_cache: dict[str, int] | None = None
    # a TensorRT candidate's engines all read from its engine cache (False: one was built)
    engine_reused: bool | None = None
    # lost on a scout against a faster leader, not timed in full (kit.search.measuring.stop_early)
    stopped_early: bool = False
    # samples/s of the first call (numerics or reference outputs), untimed window
    first_call: float | None = None
    numerics: dict = field(default_factory=dict)  # NumericsVerdict.to_dict() + mean_abs/max_abs

    def __post_init__(self) -> None:
        self.status = ProbeStatus.parse(self.status)

    @property
    def measured(self) -> bool:
        return self.throughput is not None

    @property
    def rate(self) -> float:
        """`throughput` of a measured probe (samples/s), where a ranking or a ratio needs one."""
        if self.throughput is None:
            raise KitError(f"{self.label}: not measured, no throughput to rank or compare")
        return self.throughput

    def plan(self) -> dict:
        return self.placement.plan()

    def backend_config(self) -> BackendConfig:
        return self.placement.backend_config()

    def to_dict(self) -> dict:
        return {**flat_dict(self), "status": str(self.status)}

    @classmethod
    def from_dict(cls, d: dict) -> Probe:
        return cls(**{k: v for k, v in unflat_dict(d).items() if k in cls.__dataclass_fields__})


def throughput_interval(*windows: BatchMeasurement) -> tuple[float, float, float | None]:
    """(samples/s, low, high) over one or more windows of the same configuration (a scout and the
    rest of its probe): samples over the windows' time, with a 95 % interval from the calls' spread;
    `high` is None where the interval of the mean call time reaches down to zero (a few calls with
    outliers): no upper bound."""
    ns = np.array(
        [end - start for m in windows for thread in m.calls for start, end in thread],
        dtype=np.float64,
    )
    m = windows[0]
    batch = m.batch_size * (m.threads if m.mode == "replicas" else 1)
    wall = sum(w.wall_time_s for w in windows)
    point = sum(w.samples for w in windows) / wall if wall > 0 else math.nan
    mean = ns.mean()
    if ns.size < 2:
        return float(point), math.nan, math.nan
    half = student_t.ppf(0.975, ns.size - 1) * ns.std(ddof=1) / math.sqrt(ns.size)
    fast, slow = mean - half, mean + half
    return float(point), float(batch * 1e9 / slow), float(batch * 1e9 / fast) if fast > 0 else None


def reference_scale(outputs: list[np.ndarray]) -> float:
    """Mean |value| over every reference output (the numerics gate's yardstick)."""
    flat = np.concatenate([np.asarray(o, dtype=np.float64).ravel() for o in outputs])
    finite = flat[np.isfinite(flat)]
    return float(np.abs(finite).mean()) if finite.size else 0.0


def nonfinite(outputs: list[np.ndarray]) -> int:
    return int(sum((~np.isfinite(np.asarray(o, dtype=np.float64))).sum() for o in outputs))


def time_session(session, inputs: dict, batch: int, cfg: MeasureConfig) -> BatchMeasurement:
    """The probe's timing: the kit's one timed window, no power sampling."""
    return session.measure_window(inputs, batch, cfg, None)


def release() -> None:
    """Give a closed session's memory back before the next candidate loads."""
    gc.collect()


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def numerics_record(diff: NumericDiff) -> dict:
    return {"mean_abs": diff.mean_abs, "max_abs": diff.max_abs, "mean_rel": diff.mean_rel}
