"""What ONNX Runtime really runs here: whether a session starts a provider first, probed with a
one-node model (ORT lists the providers it was built with, then falls back silently), after the GPU
libraries pip installed are preloaded as a real session would find them."""

from __future__ import annotations

import ctypes
import functools
import importlib.util
from pathlib import Path

#: The TensorRT major onnxruntime-gpu's TensorRT provider is linked against (libnvinfer.so.10), and
#: the libraries it loads; the tensorrt-cu13-libs wheel puts them in site-packages/tensorrt_libs.
TENSORRT_MAJOR = 10
TENSORRT_LIBRARIES = ("libnvinfer.so", "libnvinfer_plugin.so", "libnvonnxparser.so")
BROKEN = (
    "onnxruntime is broken here: its module has no get_available_providers (one ORT build's "
    "files removed by uninstalling the other, onnxruntime vs onnxruntime-gpu); `make install` "
    "repairs it (kit/hardware/gpu_install.py onnxruntime gpu|cpu)"
)


@functools.cache
def ort_provider_reason(provider: str) -> str | None:
    """None when an ONNX Runtime session here really starts `provider` first (e.g.
    'TensorrtExecutionProvider', which onnxruntime-gpu lists even without the TensorRT libraries),
    else why not."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    if not callable(getattr(ort, "get_available_providers", None)):
        return BROKEN
    preload_gpu_libraries(ort)
    if provider not in ort.get_available_providers():
        return f"onnxruntime here has no {provider} (a CPU build? install onnxruntime-gpu)"
    try:
        session = ort.InferenceSession(identity_model_bytes(), providers=[provider])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        return f"onnxruntime cannot start {provider}: {exc}"
    first = session.get_providers()[0]
    return (
        None
        if first == provider
        else (
            f"onnxruntime's {provider} did not load (the session runs on {first}: CUDA, cuDNN or "
            "TensorRT libraries missing?)"
        )
    )


def preload_gpu_libraries(ort) -> None:
    """Load the CUDA/cuDNN libraries pip installed (ORT's `preload_dlls()`, where this ORT has it)
    and TensorRT's (tensorrt_libs) so that ORT's providers find them. Absent or failing libraries
    are left to show as a provider that does not start, which every caller checks."""
    preload = getattr(ort, "preload_dlls", None)
    if callable(preload):
        try:
            preload()
        except Exception:  # noqa: BLE001, S110
            # checked afterwards as a provider that does not start
            pass
    preload_tensorrt()


def preload_tensorrt(major: int = TENSORRT_MAJOR) -> list[str]:
    """dlopen (RTLD_GLOBAL) the TensorRT `major` libraries of the tensorrt_libs wheel, if installed:
    ORT's `dlopen("libnvinfer.so.10")` then finds them by soname. Returns the paths loaded."""
    spec = importlib.util.find_spec("tensorrt_libs")
    if spec is None or not spec.submodule_search_locations:
        return []
    loaded = []
    for folder in spec.submodule_search_locations:
        for name in TENSORRT_LIBRARIES:
            path = Path(folder) / f"{name}.{major}"
            if path.exists():
                try:
                    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue
                loaded.append(str(path))
    return loaded


#: The optional ONNX Runtime GPU providers a CUDA host's search and precision mapping may offer.
OPTIONAL_GPU_PROVIDERS = ("TensorrtExecutionProvider",)


def usable_gpu_providers() -> list[str]:
    """The optional GPU providers an ONNX Runtime session really starts here (the CUDA kind's
    `ort_providers`): what the precision mapping and the per-row search offer, so that the FP8 rows
    reach TensorRT int8."""
    return [p for p in OPTIONAL_GPU_PROVIDERS if ort_provider_reason(p) is None]


def ort_cuda_reason() -> str:
    return ort_provider_reason("CUDAExecutionProvider") or ""


def identity_model_bytes() -> bytes:
    """A one-node ONNX model (float Identity): enough to see which provider a session gets."""
    from onnx import TensorProto, helper

    tensor = [1]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "kit_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, tensor)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, tensor)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()
