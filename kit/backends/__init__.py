"""Backends by name. Each imports its heavy libraries only when used.

Floor 5 of kit/ (docs/architecture.md): imports kit.datasets, kit.models, kit.measure,
kit.hardware, kit.published and the leaves; optional SDKs (onnxruntime, torch, openvino, nncf,
poprt, tensorrt) inside the functions that need them. Each backend's options are a typed record
(`options`); what runs where (backend, precision, device, threads, options) is one record,
`Placement` (`placement`).

>>> get_backend("onnxruntime").name
'onnxruntime'
"""

from __future__ import annotations

from kit.backends.base import Backend, BackendConfig, Session
from kit.backends.options import BackendOptions
from kit.backends.placement import Placement
from kit.backends.registry import BACKENDS, export_opset, get_backend, options_for, require_backend

__all__ = [
    "Backend",
    "BackendConfig",
    "BackendOptions",
    "Placement",
    "Session",
    "BACKENDS",
    "export_opset",
    "get_backend",
    "options_for",
    "require_backend",
]
