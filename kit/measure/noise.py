"""Noise during a timed window: CPU steal, load from other processes, CPU frequency.

Sampled by a background thread (every `period_s`, plus one reading when the window opens and one
when it closes), over the CPUs this process may run on. A window is marked *noisy* when any
figure passes its threshold (THRESHOLDS, stated in every summary):

- steal: share of CPU time the hypervisor gave to other guests (/proc/stat `steal`) over the
  window above 5 %, or above 20 % in any one sampling interval;
- other load: CPU time used by other processes on our CPUs (busy jiffies from /proc/stat minus
  this process's own CPU time) above 25 % of those CPUs' capacity;
- frequency: the slowest reading more than 10 % below the fastest (throttling or boost swings),
  where a frequency is readable (cpufreq in /sys, else /proc/cpuinfo; VMs often show a fixed one).

>>> with NoiseMonitor(period_s=0.05) as mon:
...     pass
>>> sorted(mon.summary().to_dict())[:3]
['cpus', 'freq_mhz', 'loadavg_1m']
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kit.hardware.cpu import SYS_CPU, cpuinfo_values, our_cpus
from kit.results.windows import Noise

THRESHOLDS = {"steal_share": 0.05, "steal_peak": 0.20, "other_load": 0.25, "freq_spread": 0.10}
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_times(cpus: list[int], stat: str = "/proc/stat") -> tuple[int, int, int] | None:
    """(busy, steal, total) jiffies summed over `cpus`, or None where /proc/stat is unreadable.

    busy = user + nice + system + irq + softirq (guest time is already inside user)."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = total = 0
    found = False
    try:
        with open(stat) as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] in wanted:
                    v = [int(x) for x in parts[1:9]] + [0] * max(0, 8 - len(parts[1:9]))
                    busy += v[0] + v[1] + v[2] + v[5] + v[6]
                    steal += v[7]
                    total += sum(v[:8])
                    found = True
    except (OSError, ValueError):
        return None
    return (busy, steal, total) if found else None


def cpu_mhz(cpus: list[int], sys_cpu: Path = SYS_CPU) -> tuple[list[float], str]:
    """Current frequency per CPU in MHz, and where it was read ('' when unreadable)."""
    readings = []
    for c in cpus:
        try:
            readings.append(
                int((sys_cpu / f"cpu{c}" / "cpufreq" / "scaling_cur_freq").read_text()) / 1000
            )
        except (OSError, ValueError):
            break
    if len(readings) == len(cpus) and readings:
        return readings, "cpufreq scaling_cur_freq"
    try:
        mhz = [float(value) for value in cpuinfo_values("cpu MHz")]
    except ValueError:
        mhz = []
    picked = [mhz[c] for c in cpus if c < len(mhz)]
    if picked:
        return picked, "/proc/cpuinfo 'cpu MHz'"
    return [], ""


class NoiseMonitor:
    """Open with the timed window (`with`), close with it; `summary()` gives the noise figures."""

    def __init__(self, period_s: float = 0.5):
        self.period_s = period_s
        self.cpus = our_cpus()
        self._first: tuple | None = None
        self._last: tuple | None = None
        self._peak_steal = 0.0
        self._mhz: list[float] = []
        self._mhz_source = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> NoiseMonitor:
        self._first = self._reading()
        self._last = self._first
        self._thread = threading.Thread(target=self._run, name="kit-noise-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def _reading(self) -> tuple:
        return time.perf_counter(), time.process_time(), cpu_times(self.cpus)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def _sample(self) -> None:
        now = self._reading()
        prev, self._last = self._last, now
        if prev and prev[2] and now[2] and now[2][2] > prev[2][2]:
            self._peak_steal = max(
                self._peak_steal, (now[2][1] - prev[2][1]) / (now[2][2] - prev[2][2])
            )
        mhz, source = cpu_mhz(self.cpus)
        self._mhz += mhz
        self._mhz_source = self._mhz_source or source

    def summary(self) -> Noise:
        """Steal, other processes' load and frequency over the window, with the noisy flag and
        why (every figure in the record's JSON, the ones readers use as its fields)."""
        out: dict = {
            "cpus": len(self.cpus),
            "thresholds": dict(THRESHOLDS),
            "loadavg_1m": _loadavg(),
        }
        assert self._first is not None and self._last is not None, (
            "summary() after the window's `with`"
        )
        (t0, own0, stat0), (t1, own1, stat1) = self._first, self._last
        if stat0 and stat1 and stat1[2] > stat0[2]:
            elapsed = max(t1 - t0, 1e-9)
            out["steal_share"] = (stat1[1] - stat0[1]) / (stat1[2] - stat0[2])
            out["steal_peak"] = max(self._peak_steal, out["steal_share"])
            others_s = (stat1[0] - stat0[0]) / CLK_TCK - (own1 - own0)
            out["other_load"] = max(0.0, others_s / (elapsed * len(self.cpus)))
        else:
            out["stat_reason"] = (
                "/proc/stat unreadable or the window was shorter than one clock tick"
            )
        if self._mhz:
            out["freq_mhz"] = {
                "min": min(self._mhz),
                "max": max(self._mhz),
                "mean": sum(self._mhz) / len(self._mhz),
                "source": self._mhz_source,
            }
        else:
            out["freq_mhz"] = None
            out["freq_reason"] = "no readable CPU frequency (no cpufreq, no 'cpu MHz')"
        out["reasons"] = noisy_reasons(out)
        out["noisy"] = bool(out["reasons"])
        return Noise.from_dict(out)


def idle_sample(seconds: float = 0.5) -> Noise:
    """The noise summary of a pause in which this process does nothing: what the rest of the
    machine is doing (other processes' load, steal), e.g. before choosing how far to trust
    probes."""
    with NoiseMonitor(period_s=seconds / 4) as monitor:
        time.sleep(seconds)
    return monitor.summary()


def noisy_reasons(summary: dict) -> list[str]:
    """Why a window counts as noisy (empty when it does not), each against its stated threshold."""
    th = summary.get("thresholds", THRESHOLDS)
    reasons = []
    if summary.get("steal_share", 0) > th["steal_share"]:
        reasons.append(f"CPU steal {summary['steal_share']:.0%} > {th['steal_share']:.0%}")
    elif summary.get("steal_peak", 0) > th["steal_peak"]:
        reasons.append(f"CPU steal peaked at {summary['steal_peak']:.0%} > {th['steal_peak']:.0%}")
    if summary.get("other_load", 0) > th["other_load"]:
        reasons.append(
            f"other processes used {summary['other_load']:.0%} of our CPUs > {th['other_load']:.0%}"
        )
    freq = summary.get("freq_mhz")
    if freq and freq["max"] > 0 and 1 - freq["min"] / freq["max"] > th["freq_spread"]:
        reasons.append(
            f"CPU frequency varied {freq['min']:.0f}-{freq['max']:.0f} MHz "
            f"(> {th['freq_spread']:.0%} spread)"
        )
    return reasons


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
