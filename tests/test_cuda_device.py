"""kit.hardware.kinds's CUDA facts: visible GPUs, one CUDA device per run, and `auto` only when CUDA loads."""

from __future__ import annotations

import pytest
from gpu_fakes import Board, FakeHost, four_boards, install

from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware import kinds as hardware
from kit.hardware import onnxruntime_probe


@pytest.fixture
def host(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return install(monkeypatch, FakeHost(four_boards()), nvml=False)


def buses(rows) -> list[str]:
    return [r.pci_bus_id[9:11] for r in rows]


@pytest.mark.parametrize(("visible", "expected"), [
    (None, ["01", "21", "41", "81"]),  # PCI bus order, whatever NVML's indices
    ("2,0", ["41", "01"]),
    ("1,7,2", ["21"]),  # CUDA stops at the first entry it cannot match
    ("0,0", ["01"]),
    ("", []),
    ("GPU-0002,GPU-0000", ["41", "81"]),  # UUIDs (NVML index 2 and 0)
    ("-1", []),
])
def test_visible_gpus_follow_cuda_visible_devices(host, visible, expected):
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert buses(hardware.visible_gpus(env=env)) == expected


def test_cuda_device_resolves_ordinal_to_bus_id_once(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    first = hardware.cuda_device(1)
    assert (first.index, first.pci_bus_id) == (1, "00000000:21:00.0")
    assert hardware.cuda_device(1) is first  # resolved once per run and environment
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert hardware.cuda_device(0).pci_bus_id == "00000000:01:00.0"


def test_absent_ordinal_and_bad_ordinal(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(BackendUnavailable, match=r"CUDA device 1 unavailable: this process sees 1 GPU\(s\)"):
        hardware.cuda_device(1)
    with pytest.raises(InvalidParameter, match="device_id"):
        hardware.cuda_device(-1)


def test_mixed_models_need_pci_bus_order(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    boards = [Board(0, "00000000:01:00.0", "NVIDIA T4", 1), Board(1, "00000000:02:00.0", "NVIDIA L4", 1)]
    install(monkeypatch, FakeHost(boards), nvml=False)
    with pytest.raises(KitError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        hardware.cuda_device(0)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert hardware.cuda_device(1).name == "NVIDIA L4"


def test_bus_ids_are_normalised():
    assert hardware.normalise_bus_id("0000:65:00.0") == "00000000:65:00.0"
    assert hardware.normalise_bus_id("00000000:B3:00.0") == "00000000:b3:00.0"
    rows = hardware.parse_smi_rows("0, 00000000:B3:00.0, GPU-abc, NVIDIA H100 80GB HBM3\nNo devices\n")
    assert rows == (hardware.GpuRow(0, "00000000:b3:00.0", "GPU-abc", "NVIDIA H100 80GB HBM3"),)


def test_auto_picks_cuda_only_when_a_cuda_backend_loads(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_names", lambda: ("NVIDIA A100-SXM4-80GB",))
    monkeypatch.setattr(hardware, "ipu_present", lambda: False)
    monkeypatch.setattr(hardware, "cuda_backend_loads", lambda: "onnxruntime here is a CPU build")
    assert hardware.present() == ["cpu"] and hardware.resolve("auto") == "cpu"
    monkeypatch.setattr(hardware, "cuda_backend_loads", lambda: None)
    assert hardware.present() == ["cpu", "cuda"] and hardware.resolve("auto") == "cuda"


def test_cuda_backend_loads_checks_a_real_session(monkeypatch):
    """A CUDA provider that is listed but falls back to the CPU is not a CUDA backend."""
    import onnxruntime as ort
    import torch

    class FallbackSession:
        def __init__(self, model, providers):
            self.asked = providers

        def get_providers(self):
            return ["CPUExecutionProvider"]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", FallbackSession)
    clear = [hardware.cuda_backend_loads.cache_clear, onnxruntime_probe.ort_provider_reason.cache_clear]
    for c in clear:
        c()
    try:
        reason = hardware.cuda_backend_loads()
        assert "did not load (the session runs on CPUExecutionProvider" in reason
        assert "TensorrtExecutionProvider" in onnxruntime_probe.ort_provider_reason("TensorrtExecutionProvider")
        monkeypatch.setattr(FallbackSession, "get_providers", lambda self: ["CUDAExecutionProvider"])
        for c in clear:
            c()
        assert hardware.cuda_backend_loads() is None
    finally:
        for c in clear:
            c()


def test_this_machine_without_a_gpu_is_cpu_only():
    if hardware.gpu_names():
        pytest.skip("a GPU is listed here")
    assert "cuda" not in hardware.present()
