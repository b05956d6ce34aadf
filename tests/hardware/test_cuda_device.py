"""kit.hardware.kinds's CUDA facts: visible GPUs, one CUDA device per run, and `auto` only when CUDA
loads."""

from __future__ import annotations

import pytest
from gpu_fakes import Board, FakeHost, four_boards, install

from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware import cuda, ipu, onnxruntime_probe
from kit.hardware import kinds as hardware


@pytest.fixture
def host(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return install(monkeypatch, FakeHost(four_boards()), nvml=False)


def buses(rows) -> list[str]:
    return [r.pci_bus_id[9:11] for r in rows]


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, ["01", "21", "41", "81"]),  # PCI bus order, whatever NVML's indices
        ("2,0", ["41", "01"]),
        ("1,7,2", ["21"]),  # CUDA stops at the first entry it cannot match
        ("0,0", ["01"]),
        ("", []),
        ("GPU-0002,GPU-0000", ["41", "81"]),  # UUIDs (NVML index 2 and 0)
        ("-1", []),
    ],
)
def test_visible_gpus_follow_cuda_visible_devices(host, visible, expected):
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert buses(cuda.visible_gpus(env=env)) == expected


def test_cuda_device_resolves_ordinal_to_bus_id_once(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    first = cuda.cuda_device(1)
    assert (first.index, first.pci_bus_id) == (1, "00000000:21:00.0")
    assert cuda.cuda_device(1) is first  # resolved once per run and environment
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert cuda.cuda_device(0).pci_bus_id == "00000000:01:00.0"


def test_absent_ordinal_and_bad_ordinal(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(
        BackendUnavailable, match=r"CUDA device 1 unavailable: this process sees 1 GPU\(s\)"
    ):
        cuda.cuda_device(1)
    with pytest.raises(InvalidParameter, match="device_id"):
        cuda.cuda_device(-1)


def test_mixed_models_need_pci_bus_order(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    boards = [
        Board(0, "00000000:01:00.0", "NVIDIA T4", 1),
        Board(1, "00000000:02:00.0", "NVIDIA L4", 1),
    ]
    install(monkeypatch, FakeHost(boards), nvml=False)
    with pytest.raises(KitError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        cuda.cuda_device(0)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert cuda.cuda_device(1).name == "NVIDIA L4"


def test_bus_ids_are_normalised():
    assert cuda.normalise_bus_id("0000:65:00.0") == "00000000:65:00.0"
    assert cuda.normalise_bus_id("00000000:B3:00.0") == "00000000:b3:00.0"
    rows = cuda.parse_smi_rows("0, 00000000:B3:00.0, GPU-abc, NVIDIA H100 80GB HBM3\nNo devices\n")
    assert rows == (cuda.GpuRow(0, "00000000:b3:00.0", "GPU-abc", "NVIDIA H100 80GB HBM3"),)


def test_auto_picks_cuda_only_when_a_cuda_backend_loads(monkeypatch):
    monkeypatch.setattr(cuda, "gpu_names", lambda: ("NVIDIA A100-SXM4-80GB",))
    monkeypatch.setattr(ipu, "ipu_present", lambda: False)
    monkeypatch.setattr(cuda, "cuda_backend_loads", lambda: "onnxruntime here is a CPU build")
    assert hardware.present() == ["cpu"] and hardware.resolve("auto") == "cpu"
    monkeypatch.setattr(cuda, "cuda_backend_loads", lambda: None)
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
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(ort, "InferenceSession", FallbackSession)
    clear = [cuda.cuda_backend_loads.cache_clear, onnxruntime_probe.ort_provider_reason.cache_clear]
    for c in clear:
        c()
    try:
        reason = cuda.cuda_backend_loads()
        assert "did not load (the session runs on CPUExecutionProvider" in reason
        assert "TensorrtExecutionProvider" in onnxruntime_probe.ort_provider_reason(
            "TensorrtExecutionProvider"
        )
        monkeypatch.setattr(
            FallbackSession, "get_providers", lambda self: ["CUDAExecutionProvider"]
        )
        for c in clear:
            c()
        assert cuda.cuda_backend_loads() is None
    finally:
        for c in clear:
            c()


def test_this_machine_without_a_gpu_is_cpu_only():
    if cuda.gpu_names():
        pytest.skip("a GPU is listed here")
    assert "cuda" not in hardware.present()


# ---------------------------------------------------------------- why a listed GPU is not used


@pytest.fixture
def fresh_probe():
    clear = [cuda.cuda_backend_loads.cache_clear, onnxruntime_probe.ort_provider_reason.cache_clear]
    for c in clear:
        c()
    yield
    for c in clear:
        c()


def test_a_broken_onnxruntime_module_is_a_reason_not_a_crash(monkeypatch, fresh_probe):
    """The issue's re-install left `onnxruntime` importable without get_available_providers."""
    import sys
    import types

    import torch

    monkeypatch.setitem(sys.modules, "onnxruntime", types.ModuleType("onnxruntime"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    reason = onnxruntime_probe.ort_provider_reason("CUDAExecutionProvider")
    assert reason.startswith(
        "onnxruntime is broken here: its module has no get_available_providers"
    )
    assert "`make install` repairs it" in cuda.cuda_backend_loads()


def test_an_old_driver_is_named_first(monkeypatch, fresh_probe):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(
        cuda, "ort_cuda_reason", lambda: "onnxruntime's CUDAExecutionProvider did not load"
    )
    monkeypatch.setattr(cuda, "driver_version", lambda: "575.57.08")
    reason = cuda.cuda_backend_loads()
    assert reason.startswith(
        "NVIDIA driver 575.57.08 is older than R580, which the pinned CUDA 13 builds need"
    )
    assert reason.endswith("sees no CUDA device; onnxruntime's CUDAExecutionProvider did not load")
    cuda.cuda_backend_loads.cache_clear()
    monkeypatch.setattr(cuda, "driver_version", lambda: "580.65.06")
    assert cuda.cuda_backend_loads().startswith("torch ")  # a driver new enough is not blamed


def test_probe_preloads_cuda_and_tensorrt_libraries_before_its_session(
    monkeypatch, tmp_path, fresh_probe
):
    """ORT's preload_dlls() where it exists, then libnvinfer.so.10 & co. from the tensorrt_libs
    wheel (RTLD_GLOBAL, so ORT's dlopen by soname finds them), then the probing session."""
    import ctypes

    import onnxruntime as ort

    libs = tmp_path / "tensorrt_libs"
    libs.mkdir()
    (libs / "__init__.py").write_text("")
    for name in ("libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvinfer.so.11"):
        (libs / name).write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    events = []

    class Session:
        def __init__(self, model, providers):
            events.append(("session", providers))

        def get_providers(self):
            return ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]

    monkeypatch.setattr(
        ort, "preload_dlls", lambda *a, **k: events.append(("preload_dlls",)), raising=False
    )
    monkeypatch.setattr(
        ort,
        "get_available_providers",
        lambda: ["TensorrtExecutionProvider", "CPUExecutionProvider"],
    )
    monkeypatch.setattr(ort, "InferenceSession", Session)
    monkeypatch.setattr(
        onnxruntime_probe.ctypes, "CDLL", lambda path, mode=0: events.append(("dlopen", path, mode))
    )
    assert onnxruntime_probe.ort_provider_reason("TensorrtExecutionProvider") is None
    assert events == [
        ("preload_dlls",),
        ("dlopen", str(libs / "libnvinfer.so.10"), ctypes.RTLD_GLOBAL),
        ("dlopen", str(libs / "libnvinfer_plugin.so.10"), ctypes.RTLD_GLOBAL),
        ("session", ["TensorrtExecutionProvider"]),
    ]


def test_unused_gpu_reason(monkeypatch):
    monkeypatch.setattr(cuda, "gpu_names", lambda: ("NVIDIA A100-SXM4-80GB",))
    monkeypatch.setattr(
        cuda, "cuda_backend_loads", lambda: "NVIDIA driver 575.57.08 is older than R580"
    )
    assert cuda.unused_gpu_reason(["cpu"]) == (
        "GPU not used (nvidia-smi lists NVIDIA A100-SXM4-80GB; this run "
        "measures cpu): NVIDIA driver 575.57.08 is older than R580"
    )
    assert cuda.unused_gpu_reason(["cuda"]).startswith(
        "cuda asked for, but no CUDA backend loads here"
    )
    monkeypatch.setattr(cuda, "cuda_backend_loads", lambda: None)
    assert cuda.unused_gpu_reason(["cpu"]) is None
    monkeypatch.setattr(cuda, "gpu_names", lambda: ())
    assert cuda.unused_gpu_reason(["cpu"]) is None


def test_kit_reproduce_says_why_the_listed_gpu_is_not_used(monkeypatch, outputs, capsys):
    from kit.cli import reproduce
    from kit.cli.main import main as kit_main

    monkeypatch.setattr(cuda, "gpu_names", lambda: ("NVIDIA A100-SXM4-80GB",))
    monkeypatch.setattr(ipu, "ipu_present", lambda: False)
    monkeypatch.setattr(
        cuda, "cuda_backend_loads", lambda: "NVIDIA driver 575.57.08 is older than R580"
    )
    monkeypatch.setattr(
        reproduce, "jobs_for", lambda profile, kind, research=False, search=True: []
    )
    kit_main(["reproduce", "--hardware", "auto"])  # no jobs: it then stops with nothing to index
    out = capsys.readouterr().out
    assert out.startswith(
        "GPU not used (nvidia-smi lists NVIDIA A100-SXM4-80GB; this run measures cpu): "
        "NVIDIA driver 575.57.08 is older than R580\n"
    )
