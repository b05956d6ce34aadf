"""NVIDIA GPU power through NVML (the `nvidia-ml-py` package, imported as `pynvml`).

One board: the CUDA device the run uses (`SamplerOptions.cuda_device`, default ordinal 0, the
backends' default), opened by PCI bus id. NVML's own indices ignore CUDA_VISIBLE_DEVICES and need
not match CUDA's ordinals, so an index would read the wrong board; the sampler never sums every
board. `SamplerOptions.devices` still selects NVML indices explicitly (summed, and the sensor
string says so).

Power: the instantaneous field (`NVML_FI_DEV_POWER_INSTANT`) where the driver offers it, else
`nvmlDeviceGetPowerUsage`, which on Ampere and newer (except GA100) is a 1-second average.
Energy: `nvmlDeviceGetTotalEnergyConsumption` (mJ since the driver loaded, Volta and newer,
updated about every 100 ms) as a counter difference; else the integral of the power samples.
Windows shorter than `MIN_WINDOW_S` carry a note that the figure is below the sensor's resolution.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from kit.errors import KitError
from kit.hardware import cuda
from kit.measure.power.base import PowerSampler, Reading, SamplerOptions, SensorError

#: A power figure needs at least this long a window: 1 s averaging and ~100 ms counter updates
#: give +-10-20 % error over 1-2 s windows.
MIN_WINDOW_S = 10.0


def _pynvml():
    return importlib.import_module("pynvml")


class NvmlSampler(PowerSampler):
    """NVML power (and energy counter where supported) of the run's GPU."""

    name = "nvml"
    min_window_s = MIN_WINDOW_S

    def __init__(self, options: SamplerOptions | None = None) -> None:
        super().__init__(options)
        self.handles: list = []
        self.indices: tuple[int, ...] = ()
        self.boards: list[str] = []  # what each handle is, in words (PCI bus id or NVML index)
        self.instant = False
        self._energy_start_mj: list[int] | None = None
        self._nvml: Any = None  # the pynvml module, once opened
        self._opened_at: float | None = None

    @property
    def sensor(self) -> str:
        power = "NVML_FI_DEV_POWER_INSTANT" if self.instant else "nvmlDeviceGetPowerUsage"
        counter = " + nvmlDeviceGetTotalEnergyConsumption" if self.has_energy_counter else ""
        boards = " + ".join(self.boards) or "GPU?"
        return f"NVML {power}{counter} {boards}"

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
            raise SensorError(
                f"NVML unavailable: {exc} (no NVIDIA driver on this machine?)"
            ) from None
        try:
            self._open_boards(nvml, count)
        except SensorError:
            nvml.nvmlShutdown()
            raise
        self._nvml = nvml

    def _open_boards(self, nvml, count: int) -> None:
        indices = self.options.devices
        if indices is not None:  # explicit NVML indices
            if max(indices) >= count:
                raise SensorError(f"NVML lists {count} GPU(s); asked for NVML indices {indices}")
            self.indices = tuple(indices)
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self.boards = [f"NVML index {i}" for i in indices]
            return

        ordinal = self.options.cuda_device or 0
        try:
            gpu = cuda.cuda_device(ordinal)
        except KitError as exc:
            raise SensorError(
                f"NVML: cannot tell which board is CUDA device {ordinal}: {exc}"
            ) from None
        try:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(gpu.pci_bus_id)
            self.indices = (int(nvml.nvmlDeviceGetIndex(handle)),)
        except Exception as exc:  # noqa: BLE001
            raise SensorError(
                f"NVML has no GPU at PCI bus id {gpu.pci_bus_id} (CUDA device {ordinal}): {exc}"
            ) from None
        self.handles = [handle]
        self.boards = [
            f"CUDA device {gpu.index} ({gpu.name}, PCI {gpu.pci_bus_id}, NVML index "
            f"{self.indices[0]})"
        ]

    def open(self) -> None:
        self._init()
        self.instant = all(self._instant_mw(h) is not None for h in self.handles)
        try:
            self._energy_start_mj = [
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles
            ]
            self.has_energy_counter = True
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported before Volta
            self._energy_start_mj, self.has_energy_counter = None, False
            self.notes.append("NVML energy counter not supported: energy integrated from power")
        if not self.instant:
            self.notes.append(
                "NVML instantaneous power field not offered: nvmlDeviceGetPowerUsage, a 1 s "
                "average on Ampere and newer"
            )
        self._opened_at = time.perf_counter()

    def _instant_mw(self, handle) -> int | None:
        """The instantaneous power field in mW, or None where this driver/board lacks it."""
        nvml = self._nvml
        field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None:
            return None
        try:
            value = nvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported / FunctionNotFound on old drivers
            return None
        return int(value.value.uiVal) if value.nvmlReturn == 0 else None

    def read(self) -> Reading:
        nvml = self._nvml
        try:
            if self.instant:
                instant = [self._instant_mw(h) for h in self.handles]
                milliwatts = [mw for mw in instant if mw is not None]
                if len(milliwatts) < len(instant):
                    raise SensorError("NVML instantaneous power field became unreadable")
            else:
                milliwatts = [nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles]
            energy = None
            if self._energy_start_mj is not None:
                now = [nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
                energy = sum(n - s for n, s in zip(now, self._energy_start_mj, strict=True)) / 1e3
        except SensorError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise SensorError(f"NVML read failed: {exc}") from None
        return Reading(watts=sum(milliwatts) / 1e3, energy_j=energy)

    def close(self) -> None:
        if self._opened_at is not None:
            window = time.perf_counter() - self._opened_at
            if window < self.min_window_s:
                self.notes.append(
                    f"below the sensor's resolution: a {window:.1f} s window, NVML needs at least "
                    f"{self.min_window_s:g} s for a power figure (1 s power averaging, ~100 ms "
                    "energy counter updates)"
                )
            self._opened_at = None
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            finally:
                self._nvml, self.handles = None, []
