"""Power and energy during a measurement, with the method named: measured, or unavailable and why.

Samplers by name in `SAMPLERS`; `select_sampler(kind)` gives the best one present for a kind of
hardware, or an UnavailableSampler carrying every candidate's reason (never a silent estimate).

>>> s = select_sampler("cpu", SamplerOptions(powercap_root="/nonexistent"))
>>> s.available, s.reason
(False, 'rapl: no powercap interface on this machine (/nonexistent missing)')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kit.hardware import kinds as hardware
from kit.measure.power.base import (
    PowerSampler,
    Reading,
    SamplerOptions,
    SensorError,
    UnavailableSampler,
)
from kit.measure.power.ipu import GcCliSampler, GcIpuInfoSampler, enable_ipu_monitoring
from kit.measure.power.monitor import PowerMonitor
from kit.measure.power.nvml import NvmlSampler
from kit.measure.power.rapl import RaplSampler
from kit.measure.power.summary import PowerSummary
from kit.registry import Registry

__all__ = [
    "SAMPLERS",
    "SENSORS",
    "KindSensors",
    "PowerSampler",
    "Reading",
    "SamplerOptions",
    "SensorError",
    "UnavailableSampler",
    "PowerMonitor",
    "PowerSummary",
    "enable_ipu_monitoring",
    "select_sampler",
    "make_sampler",
    "sampler_for",
]

SAMPLERS: Registry[type[PowerSampler]] = Registry("power sampler")
for _cls in (RaplSampler, NvmlSampler, GcIpuInfoSampler, GcCliSampler, UnavailableSampler):
    SAMPLERS.register(_cls.name, _cls)


def nothing_to_prepare() -> None:
    return None


@dataclass(frozen=True)
class KindSensors:
    """A hardware kind's power sensors, best first, and what must be set before any reads."""

    samplers: tuple[str, ...]
    prepare: Callable[[], object] = nothing_to_prepare


#: Each hardware kind's sensors, by the kind's name (kit.hardware.kinds).
SENSORS: dict[str, KindSensors] = {
    # GCDA_MONITOR=1 for the worker
    hardware.IPU.name: KindSensors(("gcipuinfo", "gc-cli"), enable_ipu_monitoring),
    hardware.CUDA.name: KindSensors(("nvml",)),
    hardware.CPU.name: KindSensors(("rapl",)),
}


def make_sampler(name: str, options: SamplerOptions | None = None) -> PowerSampler:
    """A sampler by registry name (not probed)."""
    return SAMPLERS.get(name)(options=options)


def select_sampler(kind: str = "auto", options: SamplerOptions | None = None) -> PowerSampler:
    """The first sensor of hardware `kind` whose probe passes, else an UnavailableSampler
    listing each reason.

    `kind` is the kind the study runs on ('cpu', 'cuda', 'ipu'), or 'auto' for the main hardware
    here. It never falls back from an accelerator to the CPU's sensor, which would label a GPU run
    with CPU power.
    """
    kind = hardware.resolve(kind)
    reasons = []
    for name in SENSORS[kind].samplers:
        sampler = make_sampler(name, options)
        reason = sampler.probe()
        if reason is None:
            return sampler
        reasons.append(f"{name}: {reason}")
    return UnavailableSampler(reasons, options)


def sampler_for(
    kind: str,
    enabled: bool = True,
    options: SamplerOptions | None = None,
    cuda_device: int | None = None,
) -> PowerSampler:
    """The sampler for the hardware kind a study runs on, or an unavailable one saying why.

    On a GPU it reads the board of the run's CUDA ordinal `cuda_device` (after
    CUDA_VISIBLE_DEVICES; default 0, the ordinal the backends use by default). On an IPU it also
    sets GCDA_MONITOR=1 for the worker, without which no sensor reads.
    """
    if cuda_device is not None:
        options = replace(options or SamplerOptions(), cuda_device=cuda_device)
    if not enabled:
        off = UnavailableSampler(["power sampling switched off (power=False)"], options)
        off.switched_off = True
        return off
    kind = hardware.resolve(kind)
    SENSORS[kind].prepare()
    return select_sampler(kind, options)
