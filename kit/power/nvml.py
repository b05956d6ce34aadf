"""NVIDIA GPU power through NVML (the `nvidia-ml-py` package, imported as `pynvml`).

`nvmlDeviceGetPowerUsage` gives milliwatts now; `nvmlDeviceGetTotalEnergyConsumption` gives
millijoules since the driver loaded (Volta and newer). Where every selected GPU has the counter,
energy is its difference; else the integral of the power samples. NVML updates both about every
100 ms, so windows much shorter than a second read coarse values.
"""

from __future__ import annotations

import importlib

from kit.power.base import PowerSampler, Reading, SensorError


def _pynvml():
    return importlib.import_module("pynvml")


class NvmlSampler(PowerSampler):
    """Sum over the selected GPUs of NVML power usage (and energy counter where supported)."""

    name = "nvml"

    def __init__(self, options=None):
        super().__init__(options)
        self.handles: list = []
        self.indices: tuple[int, ...] = ()
        self._energy_start_mj: list[int] | None = None
        self._nvml = None

    @property
    def sensor(self) -> str:
        gpus = "+".join(f"GPU{i}" for i in self.indices) or "GPU?"
        counter = " + nvmlDeviceGetTotalEnergyConsumption" if self.has_energy_counter else ""
        return f"NVML nvmlDeviceGetPowerUsage{counter} {gpus}"

    def probe(self) -> str | None:
        try:
            self._init()
            self._nvml.nvmlDeviceGetPowerUsage(self.handles[0])
        except SensorError as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses per error code
            return f"NVML cannot read power: {exc}"
        return None

    def _init(self) -> None:
        if self._nvml is not None:
            return
        try:
            nvml = _pynvml()
        except ImportError:
            raise SensorError("NVML unavailable: nvidia-ml-py (pynvml) is not installed") from None
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded...
            raise SensorError(f"NVML unavailable: {exc} (no NVIDIA driver on this machine?)") from None
        indices = self.options.devices if self.options.devices is not None else tuple(range(count))
        if not indices or max(indices) >= count:
            raise SensorError(f"NVML lists {count} GPU(s); asked for {indices}")
        self._nvml, self.indices = nvml, tuple(indices)
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]

    def open(self) -> None:
        self._init()
        try:
            self._energy_start_mj = [self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)
                                     for h in self.handles]
            self.has_energy_counter = True
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported before Volta
            self._energy_start_mj, self.has_energy_counter = None, False
            self.notes.append("NVML energy counter not supported: energy integrated from power")

    def read(self) -> Reading:
        nvml = self._nvml
        try:
            watts = sum(nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles) / 1e3
            energy = None
            if self._energy_start_mj is not None:
                now = [nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
                energy = sum(n - s for n, s in zip(now, self._energy_start_mj, strict=True)) / 1e3
        except Exception as exc:  # noqa: BLE001
            raise SensorError(f"NVML read failed: {exc}") from None
        return Reading(watts=watts, energy_j=energy)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            finally:
                self._nvml, self.handles = None, []
