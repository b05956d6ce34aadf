"""Backends by name. Each imports its heavy libraries only when used.

Floor 5 of kit/ (docs/architecture.md): imports kit.datasets, kit.models, kit.measure,
kit.hardware, kit.published and the leaves; optional SDKs (onnxruntime, torch, openvino, nncf, poprt, tensorrt) inside
the functions that need them.

>>> get_backend("onnxruntime").name
'onnxruntime'
"""

from __future__ import annotations

from kit.backends.base import Backend, BackendConfig, Session
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

__all__ = ["Backend", "BackendConfig", "BackendOptions", "Session", "BACKENDS", "export_opset", "get_backend",
           "options_for", "require_backend"]


def export_opset(name: str) -> int:
    """The ONNX opset backend `name` wants the zoo's models exported at."""
    return BACKENDS.get(name).export_opset


def options_for(name: str, value: BackendOptions | dict | None) -> BackendOptions:
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
