"""Test doubles for a multi-GPU host without a GPU: nvidia-smi rows and an NVML that enforces init,
units and PCI-bus-id lookups. NVML indices follow its own order, not CUDA's."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kit.hardware import cuda


@dataclass
class Board:
    nvml_index: int
    pci_bus_id: str  # NVML form
    name: str
    power_mw: int
    energy_mj: int = 1_000_000
    instant_mw: int | None = None  # None: the driver has no instantaneous field


@dataclass
class FakeHost:
    boards: list[Board]
    init: int = 0
    energy_supported: bool = True
    calls: list[str] = field(default_factory=list)

    def smi_rows(self) -> tuple[cuda.GpuRow, ...]:
        return tuple(
            cuda.GpuRow(b.nvml_index, b.pci_bus_id, f"GPU-{b.nvml_index:04d}", b.name)
            for b in sorted(self.boards, key=lambda b: b.nvml_index)
        )

    def board(self, bus: str) -> Board:
        return next(b for b in self.boards if b.pci_bus_id == bus)


#: Four boards whose NVML indices are not in PCI bus order (as on some multi-socket hosts).
def four_boards() -> list[Board]:
    return [
        Board(0, "00000000:81:00.0", "NVIDIA A100-SXM4-80GB", 300_000),
        Board(1, "00000000:01:00.0", "NVIDIA A100-SXM4-80GB", 100_000),
        Board(2, "00000000:41:00.0", "NVIDIA A100-SXM4-80GB", 200_000, instant_mw=205_000),
        Board(3, "00000000:21:00.0", "NVIDIA A100-SXM4-80GB", 150_000),
    ]


def install(monkeypatch: pytest.MonkeyPatch, host: FakeHost, *, nvml: bool = True) -> FakeHost:
    """nvidia-smi lists `host`'s boards, torch sees no CUDA, and (with nvml) pynvml is the
    double."""
    monkeypatch.setattr(cuda, "nvidia_smi_gpus", host.smi_rows)
    monkeypatch.setattr(cuda, "_torch_cuda_device", lambda device_id: None)
    cuda._cuda_device.cache_clear()
    if nvml:
        install_nvml(monkeypatch, host)
    return host


def install_nvml(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    import pynvml

    def need_init():
        if host.init <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def init():
        host.init += 1

    def shutdown():
        need_init()
        host.init -= 1

    def count():
        need_init()
        return len(host.boards)

    def by_index(i):
        need_init()
        if not 0 <= i < len(host.boards):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return ("handle", next(b.pci_bus_id for b in host.boards if b.nvml_index == i))

    def by_bus(bus):
        need_init()
        bus = bus.decode() if isinstance(bus, bytes) else bus
        if bus not in [b.pci_bus_id for b in host.boards]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        host.calls.append(f"bus {bus}")
        return ("handle", bus)

    def index(h):
        need_init()
        return host.board(h[1]).nvml_index

    def power(h):
        need_init()
        return host.board(h[1]).power_mw

    def energy(h):
        need_init()
        if not host.energy_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return host.board(h[1]).energy_mj

    def field_values(h, ids):
        need_init()
        assert ids == [pynvml.NVML_FI_DEV_POWER_INSTANT]
        value = pynvml.c_nvmlFieldValue_t()
        value.fieldId = ids[0]
        mw = host.board(h[1]).instant_mw
        value.nvmlReturn = (
            pynvml.NVML_SUCCESS if mw is not None else pynvml.NVML_ERROR_NOT_SUPPORTED
        )
        value.value.uiVal = mw or 0
        return [value]

    def driver():
        need_init()
        return "580.65.06"

    def cuda_driver():
        need_init()
        return 13000

    for name, fn in [
        ("nvmlInit", init),
        ("nvmlShutdown", shutdown),
        ("nvmlDeviceGetCount", count),
        ("nvmlDeviceGetHandleByIndex", by_index),
        ("nvmlDeviceGetHandleByPciBusId", by_bus),
        ("nvmlDeviceGetIndex", index),
        ("nvmlDeviceGetPowerUsage", power),
        ("nvmlDeviceGetTotalEnergyConsumption", energy),
        ("nvmlDeviceGetFieldValues", field_values),
        ("nvmlSystemGetDriverVersion", driver),
        ("nvmlSystemGetCudaDriverVersion", cuda_driver),
    ]:
        monkeypatch.setattr(pynvml, name, fn)
