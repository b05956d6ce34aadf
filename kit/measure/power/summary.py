"""PowerSummary: what a measurement window drew, with the method that says how it was known."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any

from kit.errors import InvalidParameter
from kit.measure.power.base import Series

METHODS = ("measured", "unavailable", "estimated")
COUNTER = "energy counter difference (last - first reading)"
INTEGRAL = "trapezoidal integral of power samples"


def indicative(power: Mapping[str, Any] | None) -> str:
    """'' for a power figure its sensor resolves (or none at all), else why the figure (and every
    efficiency computed from it) is indicative only. Goes wherever the figure goes.

    >>> indicative({"method": "measured", "window_resolved": False, "duration_s": 2.04, "sampler": "nvml"})
    'indicative only: a 2.0 s power window, shorter than the sensor (nvml) resolves'
    """  # noqa: E501
    if not power or power.get("method") != "measured" or power.get("window_resolved") is not False:
        return ""
    duration = power.get("duration_s")
    window = f"a {duration:.1f} s power window" if duration is not None else "the power window"
    return f"indicative only: {window}, shorter than the sensor ({power.get('sampler') or '?'}) resolves"  # noqa: E501


@dataclass
class PowerSummary:
    """Power and energy over one window. `method` says measured (which sensor), or unavailable
    (why).

    Efficiency: samples/s/W = throughput / mean power; samples/J = samples / energy. Over the same
    window the two are the same number (the C2 study's images/s/W).

    >>> PowerSummary.unavailable("no powercap interface").to_dict()["method"]
    'unavailable'
    """

    method: str
    sensor: str
    sampler: str
    _: KW_ONLY
    reason: str | None = None
    hz_requested: float | None = None
    hz_achieved: float | None = None
    n_samples: int = 0
    read_errors: int = 0
    duration_s: float | None = None
    mean_w: float | None = None  # energy / duration (time-weighted)
    mean_w_samples: float | None = None  # plain mean of the power samples (the C2 paper's way)
    min_w: float | None = None
    max_w: float | None = None
    energy_j: float | None = None
    energy_method: str | None = None
    samples_processed: int | None = None
    samples_per_s: float | None = None
    samples_per_s_per_w: float | None = None
    samples_per_j: float | None = None
    monitor_cpu_s: float | None = None  # CPU time of the sampling thread (its cost)
    window_start_ns: int | None = None  # perf_counter_ns at t_s == 0, to align with call times
    notes: list[str] = field(default_factory=list)
    #: False when the window was shorter than the sensor resolves (e.g. NVML's 10 s): the figure is
    #: then marked, never silently used; None where the sensor states no minimum.
    window_resolved: bool | None = None
    series_t_s: list[float] = field(default_factory=list)
    series_w: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidParameter("method", self.method, f"one of {', '.join(METHODS)}")
        if self.method == "unavailable" and not self.reason:
            raise InvalidParameter("reason", self.reason, "an unavailable figure must say why")

    @classmethod
    def unavailable(
        cls, reason: str, sensor: str = "none", sampler: str = "unavailable", **kwargs
    ) -> PowerSummary:
        return cls("unavailable", sensor, sampler, reason=reason, **kwargs)

    @classmethod
    def from_series(
        cls,
        series: Series,
        *,
        counter: bool,
        sensor: str,
        sampler: str,
        samples_processed: int | None = None,
        **kwargs,
    ) -> PowerSummary:
        """Summarise a window's samples: counter difference when `counter`, else the integral."""
        t, w, energy, method = _power_and_energy(series, counter)
        duration = series.t_s[-1] - series.t_s[0] if len(series) > 1 else 0.0
        if not w or duration <= 0 or energy is None:
            return cls.unavailable(
                "fewer than two readable samples in the window",
                sensor,
                sampler,
                n_samples=len(series),
                duration_s=duration,
                **kwargs,
            )
        out = cls(
            "measured",
            sensor,
            sampler,
            n_samples=len(series),
            duration_s=duration,
            mean_w=energy / duration,
            mean_w_samples=sum(w) / len(w),
            min_w=min(w),
            max_w=max(w),
            energy_j=energy,
            energy_method=method,
            hz_achieved=(len(series) - 1) / duration,
            series_t_s=t,
            series_w=w,
            **kwargs,
        )
        return out.with_samples(samples_processed) if samples_processed is not None else out

    def with_samples(self, samples_processed: int, throughput: float | None = None) -> PowerSummary:
        """Fill the efficiency columns; `throughput` defaults to samples / this window's
        duration."""
        if samples_processed < 0:
            raise InvalidParameter("samples_processed", samples_processed, ">= 0")
        self.samples_processed = samples_processed
        if self.method == "unavailable" or not self.duration_s:
            return self
        self.samples_per_s = (
            throughput if throughput is not None else samples_processed / self.duration_s
        )
        if self.mean_w:
            self.samples_per_s_per_w = self.samples_per_s / self.mean_w
        if self.energy_j:
            self.samples_per_j = samples_processed / self.energy_j
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["series_t_s"] = [round(x, 6) for x in self.series_t_s]
        d["series_w"] = [round(x, 4) for x in self.series_w]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> PowerSummary:
        return cls(**d)


def _power_and_energy(
    series: Series, counter: bool
) -> tuple[list[float], list[float], float | None, str]:
    """(t, W) series and energy: counter difference when the sampler counts, else the integral."""
    gauge = [(t, w) for t, w in zip(series.t_s, series.watts, strict=True) if w is not None]
    if counter:
        marks = [(t, e) for t, e in zip(series.t_s, series.energy_j, strict=True) if e is not None]
        if len(marks) >= 2:
            energy = marks[-1][1] - marks[0][1]
            if not gauge:  # power from counter differences, placed at each interval's midpoint
                gauge = [
                    ((t0 + t1) / 2, (e1 - e0) / (t1 - t0))
                    for (t0, e0), (t1, e1) in zip(marks, marks[1:], strict=False)
                    if t1 > t0
                ]
            return [t for t, _ in gauge], [w for _, w in gauge], energy, COUNTER
    if len(gauge) < 2:
        return [t for t, _ in gauge], [w for _, w in gauge], None, INTEGRAL
    energy = sum(
        (t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(gauge, gauge[1:], strict=False)
    )
    return [t for t, _ in gauge], [w for _, w in gauge], energy, INTEGRAL
