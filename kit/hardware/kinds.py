"""The one place that knows the kinds of hardware: what is present, what `auto` means and which kind
a device belongs to (the exact Graphcore parts are in kit.hardware.parts, CUDA devices in
kit.hardware.cuda).

Kinds are where a study runs: 'cpu', 'cuda' (an NVIDIA GPU, through CUDA or TensorRT) and 'ipu'.
A device is what a backend is asked for ('cpu', 'cuda', 'tensorrt', 'ipu'); every device belongs to
one kind. Nothing else in the kit decides hardware.

>>> kind_of("tensorrt")
'cuda'
>>> resolve("cpu")
'cpu'
"""

from __future__ import annotations

import os
import shutil

from kit.errors import InvalidParameter
from kit.hardware import cuda

KINDS = ("cpu", "cuda", "ipu")
CHOICES = ("auto", *KINDS)
PREFERENCE = ("ipu", "cuda", "cpu")  # what `auto` picks, best first
DEVICE_KIND = {"cpu": "cpu", "cuda": "cuda", "tensorrt": "cuda", "ipu": "ipu"}
DEVICES = tuple(DEVICE_KIND)
#: The class a figure's hardware belongs to, as device_info reports it.
KIND_CLASS = {"cpu": "cpu", "cuda": "gpu", "ipu": "ipu"}


def ipu_present() -> bool:
    return any(os.path.exists(f"/dev/ipu{i}") for i in range(16)) or bool(shutil.which("gc-info"))


def present() -> list[str]:
    """The kinds present here: always 'cpu', plus 'cuda' and 'ipu' when found."""
    kinds = ["cpu"]
    if cuda.gpu_names() and cuda.cuda_backend_loads() is None:  # a driver alone is not a CUDA backend
        kinds.append("cuda")
    if ipu_present():
        kinds.append("ipu")
    return kinds


def best_present(kinds: list[str] | None = None) -> str:
    """The preferred kind among `kinds` (default: those present): ipu, else cuda, else cpu."""
    kinds = present() if kinds is None else kinds
    return next(k for k in PREFERENCE if k in kinds)


def resolve(hardware: str, kinds: list[str] | None = None) -> str:
    """'auto' -> the best kind present; a kind is checked and returned as it is.

    >>> resolve("auto", kinds=["cpu", "cuda"])
    'cuda'
    """
    if hardware not in CHOICES:
        raise InvalidParameter("hardware", hardware, f"one of {', '.join(CHOICES)}")
    return best_present(kinds) if hardware == "auto" else hardware


def kind_of(device: str) -> str:
    """The kind a device belongs to ('tensorrt' runs on a CUDA GPU)."""
    if device not in DEVICE_KIND:
        raise InvalidParameter("device", device, f"one of {', '.join(DEVICES)}")
    return DEVICE_KIND[device]


def device_kind(device: str, kind: str = "") -> str:
    """The kind `device` runs on, checked against `kind` where one was already settled.

    >>> device_kind("tensorrt", "cuda")
    'cuda'
    """
    found = kind_of(device)
    if kind and kind != found:
        raise InvalidParameter("hardware", kind, f"'{found}', the kind of device {device!r}")
    return found


def hardware_class(kind_or_class: str) -> str:
    """'ipu', 'gpu' or 'cpu' for a kind ('cuda') or a device_info kind ('gpu')."""
    return KIND_CLASS.get(kind_or_class, kind_or_class if kind_or_class in KIND_CLASS.values() else "other")
