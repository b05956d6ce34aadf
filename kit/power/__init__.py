"""Power and energy during a measurement, with the method named: measured, or unavailable and why.

Samplers by name in `SAMPLERS`; `select_sampler(kind)` gives the best one present for a kind of
hardware, or an UnavailableSampler carrying every candidate's reason (never a silent estimate).

>>> s = select_sampler("cpu", SamplerOptions(powercap_root="/nonexistent"))
>>> s.available, s.reason
(False, 'rapl: no powercap interface on this machine (/nonexistent missing)')
"""

from __future__ import annotations

from kit.environment import hardware_kinds
from kit.errors import InvalidParameter
from kit.power.base import PowerSampler, Reading, SamplerOptions, SensorError, UnavailableSampler
from kit.power.ipu import GcCliSampler, GcIpuInfoSampler, enable_ipu_monitoring
from kit.power.monitor import PowerMonitor, measure_with_power
from kit.power.nvml import NvmlSampler
from kit.power.rapl import RaplSampler
from kit.power.summary import PowerSummary
from kit.registry import Registry

__all__ = ["SAMPLERS", "CANDIDATES", "PowerSampler", "Reading", "SamplerOptions", "SensorError",
           "UnavailableSampler", "PowerMonitor", "PowerSummary", "measure_with_power",
           "enable_ipu_monitoring", "select_sampler", "make_sampler"]

SAMPLERS: Registry[type[PowerSampler]] = Registry("power sampler")
for _cls in (RaplSampler, NvmlSampler, GcIpuInfoSampler, GcCliSampler, UnavailableSampler):
    SAMPLERS.register(_cls.name, _cls)

#: Samplers tried for each kind of hardware, best first.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "ipu": ("gcipuinfo", "gc-cli"),
    "cuda": ("nvml",),
    "cpu": ("rapl",),
}


def make_sampler(name: str, options: SamplerOptions | None = None) -> PowerSampler:
    """A sampler by registry name (not probed)."""
    return SAMPLERS.get(name)(options=options)


def select_sampler(hardware_kind: str = "auto", options: SamplerOptions | None = None) -> PowerSampler:
    """The first candidate whose probe passes, else an UnavailableSampler listing each reason.

    'auto' means the main hardware here: an IPU if present, else a CUDA GPU, else the CPU. It
    never falls back from an accelerator to the CPU's sensor, which would label a GPU run with
    CPU power.
    """
    kinds = _kinds(hardware_kind)
    reasons = []
    for kind in kinds:
        for name in CANDIDATES[kind]:
            sampler = make_sampler(name, options)
            reason = sampler.probe()
            if reason is None:
                return sampler
            reasons.append(f"{name}: {reason}")
    return UnavailableSampler(reasons, options)


def _kinds(hardware_kind: str) -> list[str]:
    if hardware_kind == "auto":
        present = hardware_kinds()
        return [next(k for k in ("ipu", "cuda", "cpu") if k in present)]
    if hardware_kind not in CANDIDATES:
        raise InvalidParameter("hardware_kind", hardware_kind, f"one of auto, {', '.join(CANDIDATES)}")
    return [hardware_kind]
