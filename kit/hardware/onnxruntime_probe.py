"""What ONNX Runtime really runs here: whether a session starts a provider first, probed with a
one-node model (ORT lists the providers it was built with, then falls back silently)."""

from __future__ import annotations

import functools


@functools.cache
def ort_provider_reason(provider: str) -> str | None:
    """None when an ONNX Runtime session here really starts `provider` first (e.g.
    'TensorrtExecutionProvider', which onnxruntime-gpu lists even without the TensorRT libraries),
    else why not."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    if provider not in ort.get_available_providers():
        return f"onnxruntime here has no {provider} (a CPU build? install onnxruntime-gpu)"
    try:
        session = ort.InferenceSession(identity_model_bytes(), providers=[provider])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        return f"onnxruntime cannot start {provider}: {exc}"
    first = session.get_providers()[0]
    return None if first == provider else (
        f"onnxruntime's {provider} did not load (the session runs on {first}: CUDA, cuDNN or TensorRT "
        "libraries missing?)")


def ort_cuda_reason() -> str:
    return ort_provider_reason("CUDAExecutionProvider") or ""


def identity_model_bytes() -> bytes:
    """A one-node ONNX model (float Identity): enough to see which provider a session gets."""
    from onnx import TensorProto, helper

    tensor = [1]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "kit_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, tensor)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, tensor)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()
