"""The backends by name (`BACKENDS`), and what is looked up through it: a backend, the opset its
models are exported at, its options record (`options_for`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kit.backends.base import Backend
from kit.backends.ipu.backend import IpuBackend
from kit.backends.onnxruntime_backend import OnnxRuntimeBackend
from kit.backends.openvino_backend import OpenVinoBackend
from kit.backends.options import BackendOptions
from kit.backends.tensorrt_backend import TensorRtBackend
from kit.backends.torch_backend import TorchBackend
from kit.errors import BackendUnavailable
from kit.registry import Registry

BACKENDS: Registry[type[Backend]] = Registry("backend")
BACKENDS.register("onnxruntime", OnnxRuntimeBackend)
BACKENDS.register("torch", TorchBackend)
BACKENDS.register("openvino", OpenVinoBackend)
BACKENDS.register("ipu", IpuBackend)
BACKENDS.register("tensorrt", TensorRtBackend)


def export_opset(name: str) -> int:
    """The ONNX opset backend `name` wants the zoo's models exported at."""
    return BACKENDS.get(name).export_opset


def options_for(name: str, value: BackendOptions | Mapping[str, Any] | None) -> BackendOptions:
    """Backend `name`'s options record from a run's options dict, checked (kit.backends.options).

    >>> options_for("torch", {"cuda_graph": True}).cuda_graph
    True
    """
    return BACKENDS.get(name).options_type.of(value)


def get_backend(name: str) -> Backend:
    return BACKENDS.get(name)()


def require_backend(name: str) -> Backend:
    """The backend, or BackendUnavailable with the one-line reason it cannot run here."""
    backend = get_backend(name)
    reason = backend.availability()
    if reason:
        raise BackendUnavailable(reason)
    return backend
