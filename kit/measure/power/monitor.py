"""PowerMonitor: a background thread reading one sampler at a fixed rate during a timed window.

>>> from kit.measure.power.base import UnavailableSampler
>>> with PowerMonitor(UnavailableSampler(["no sensor here"]), hz=20) as mon:
...     pass
>>> mon.summary(100).method
'unavailable'
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kit.errors import InvalidParameter, KitError
from kit.measure.power.base import PowerSampler, SensorError, Series
from kit.measure.power.summary import PowerSummary

MIN_HZ = 10.0


class PowerMonitor:
    """Start with the window (`with`), read the sampler at `hz`, stop with it; then `summary()`.

    One reading is taken synchronously when the window opens and one when it closes, so the
    energy covers the whole window; the thread fills in between.
    """

    def __init__(self, sampler: PowerSampler, hz: float = 20.0):
        if not hz >= MIN_HZ:
            raise InvalidParameter("hz", hz, f">= {MIN_HZ:g} (the issue asks for at least 10 Hz)")
        self.sampler, self.hz = sampler, float(hz)
        self.series = Series()
        self.errors: list[str] = []
        self.start_ns: int | None = None
        self.stop_ns: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._open_error: str | None = None
        self.thread_cpu_s = 0.0  # CPU time the sampling thread used: its direct cost

    def __enter__(self) -> PowerMonitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None or self.start_ns is not None:
            raise KitError("a PowerMonitor measures one window; make a new one for the next")
        if self.sampler.available:
            try:
                self.sampler.open()
            except SensorError as exc:
                self._open_error = str(exc)
        self.start_ns = time.perf_counter_ns()
        if not self.sampler.available or self._open_error:
            return
        self._sample()
        self._thread = threading.Thread(target=self._run, name="kit-power-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self.start_ns is None or self.stop_ns is not None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample()
            self.sampler.close()
        self.stop_ns = time.perf_counter_ns()

    def _run(self) -> None:
        cpu0 = time.thread_time()
        try:
            self._loop()
        finally:
            self.thread_cpu_s = time.thread_time() - cpu0

    def _loop(self) -> None:
        period = 1.0 / self.hz
        next_t = time.perf_counter() + period
        while not self._stop.wait(max(0.0, next_t - time.perf_counter())):
            self._sample()
            next_t += period
            now = time.perf_counter()
            if next_t < now:  # a slow sensor: skip missed ticks instead of bursting
                next_t = now + period

    def _sample(self) -> None:
        assert self.start_ns is not None  # sampled only inside the window
        t = (time.perf_counter_ns() - self.start_ns) / 1e9
        try:
            reading = self.sampler.read()
        except SensorError as exc:
            self.errors.append(str(exc))
            return
        self.series.append(t, reading)

    def summary(
        self, samples_processed: int | None = None, throughput: float | None = None
    ) -> PowerSummary:
        """The window's PowerSummary; efficiency columns filled when `samples_processed` is
        given."""
        if self.stop_ns is None or self.start_ns is None:
            raise KitError(
                "PowerMonitor.summary() needs the window closed (leave the `with` block)"
            )
        common: dict[str, Any] = {
            "hz_requested": self.hz,
            "read_errors": len(self.errors),
            "monitor_cpu_s": self.thread_cpu_s,
            "window_start_ns": self.start_ns,
            "notes": list(self.sampler.notes),
        }
        name, sensor = self.sampler.name, self.sampler.sensor
        reason = self._unavailable_reason()
        if reason:
            out = PowerSummary.unavailable(
                reason,
                sensor,
                name,
                n_samples=len(self.series),
                duration_s=(self.stop_ns - self.start_ns) / 1e9,
                **common,
            )
        else:
            out = PowerSummary.from_series(
                self.series,
                counter=self.sampler.has_energy_counter,
                sensor=sensor,
                sampler=name,
                **common,
            )
        if samples_processed is not None:
            out.with_samples(samples_processed, throughput)
        if out.method == "measured" and self.sampler.min_window_s:
            out.window_resolved = (self.stop_ns - self.start_ns) / 1e9 >= self.sampler.min_window_s
        return out

    def _unavailable_reason(self) -> str | None:
        if not self.sampler.available:
            return self.sampler.probe()
        if self._open_error:
            return self._open_error
        if len(self.series) < 2:
            last = f": {self.errors[-1]}" if self.errors else ""
            return (
                f"fewer than two readable samples in the window ({len(self.errors)} failed "
                f"reads){last}"
            )
        return None
