"""The one place that knows the kinds of hardware: what is present, what `auto` means, which kind a
device belongs to, and the exact Graphcore parts the published figures came from.

Kinds are where a study runs: 'cpu', 'cuda' (an NVIDIA GPU, through CUDA or TensorRT) and 'ipu'.
A device is what a backend is asked for ('cpu', 'cuda', 'tensorrt', 'ipu'); every device belongs to
one kind. Nothing else in the kit decides hardware.

>>> kind_of("tensorrt")
'cuda'
>>> resolve("cpu")
'cpu'
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from kit.errors import InvalidParameter

KINDS = ("cpu", "cuda", "ipu")
CHOICES = ("auto", *KINDS)
PREFERENCE = ("ipu", "cuda", "cpu")  # what `auto` picks, best first
DEVICE_KIND = {"cpu": "cpu", "cuda": "cuda", "tensorrt": "cuda", "ipu": "ipu"}
DEVICES = tuple(DEVICE_KIND)
#: The class a figure's hardware belongs to, as device_info reports it.
KIND_CLASS = {"cpu": "cpu", "cuda": "gpu", "ipu": "ipu"}


@functools.cache
def gpu_names() -> tuple[str, ...]:
    """NVIDIA GPUs that nvidia-smi lists (empty where there is none or no driver)."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip())


def ipu_present() -> bool:
    return any(os.path.exists(f"/dev/ipu{i}") for i in range(16)) or bool(shutil.which("gc-info"))


def present() -> list[str]:
    """The kinds present here: always 'cpu', plus 'cuda' and 'ipu' when found."""
    kinds = ["cpu"]
    if gpu_names():
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


def hardware_class(kind_or_class: str) -> str:
    """'ipu', 'gpu' or 'cpu' for a kind ('cuda') or a device_info kind ('gpu')."""
    return KIND_CLASS.get(kind_or_class, kind_or_class if kind_or_class in KIND_CLASS.values() else "other")


@dataclass(frozen=True)
class Part:
    """An exact Graphcore part: figures reproduce only on the same part."""

    key: str
    name: str
    ipu_version: str  # PopRT's name for the target; "" where PopRT cannot target it
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


PARTS = {p.key: p for p in (
    Part("gc2", "Graphcore GC2 (Mk1) IPU, C2 card", "",
         "PopRT cannot target Mk1; the C2 paper used PopART from SDK 1.0"),
    Part("c600", "Graphcore C600 (Mk2, ipu21)", "ipu21"),
    Part("m2000", "Graphcore GC200 (Mk2, ipu2: M2000 / Bow)", "ipu2"),
)}


def part_for_ipu_version(ipu_version: str | None) -> Part | None:
    """The part PopRT reports as `ipu_version` ('ipu21' -> C600), or None if unknown."""
    return next((p for p in PARTS.values() if p.ipu_version and p.ipu_version == ipu_version), None)


@dataclass(frozen=True)
class MeasuredOn:
    """Where a figure was measured: its class, the device's name, the exact part (IPUs) and
    whether the IPU path was only emulated (PopRT test double: not run on an IPU)."""

    hardware_class: str  # 'cpu', 'gpu', 'ipu' or 'unknown'
    name: str
    part: str | None = None  # a PARTS key, for IPUs
    emulated: bool = False

    def same_part(self, published_part: str | None) -> bool:
        """True only for a real (not emulated) run on exactly the published part."""
        if self.emulated or published_part is None:
            return False
        if published_part in PARTS:
            return self.hardware_class == "ipu" and self.part == published_part
        return self.hardware_class == hardware_class(published_part)

    @property
    def label(self) -> str:
        tail = " [not run on an IPU: PopRT test double]" if self.emulated else ""
        return f"{self.name} ({self.hardware_class}){tail}"

    @classmethod
    def from_backend(cls, backend: dict | None, fallback_name: str = "?") -> MeasuredOn:
        """From a result's `backend` block (its device_info and session description)."""
        backend = backend or {}
        info = backend.get("device_info") or {}
        session = backend.get("session") or {}
        emulated = bool(info.get("emulated") or session.get("emulated"))
        part = info.get("part") or getattr(part_for_ipu_version(info.get("ipu_version")), "key", None)
        return cls(info.get("kind", "unknown"), info.get("name") or fallback_name, part, emulated)
