import pytest

from kit.backends import require_backend
from kit.backends.onnxruntime_backend import OnnxRuntimeBackend
from kit.errors import BackendUnavailable


def test_missing_library_is_named_in_one_line(monkeypatch):
    monkeypatch.setattr(OnnxRuntimeBackend, "module", "onnxruntime_not_installed_here")
    with pytest.raises(
        BackendUnavailable,
        match=r"^ONNX Runtime backend unavailable: "
        r"onnxruntime_not_installed_here is not installed$",
    ):
        require_backend("onnxruntime")


def test_cpu_device_info_has_peak_and_cores():
    from kit.backends import BackendConfig

    info = OnnxRuntimeBackend().device_info(BackendConfig())
    assert info["kind"] == "cpu" and info["cores"] >= 1 and info["peak"]["gflops"] > 0
