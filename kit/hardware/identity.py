"""The exact hardware part behind a kind on this machine, for deciding what may be reused.

A kind ('cpu', 'cuda', 'ipu') says too little: a figure measured on a C600 must not be reused on
an M2000 host, nor a CPU figure on another CPU model. The part is read cheaply, without a
backend: the CPU model, the visible GPUs' names, the IPU board type and architecture (`gc-info`).
"""

from __future__ import annotations

import shutil
import subprocess

from kit.errors import InvalidParameter
from kit.hardware import cuda, kinds
from kit.hardware.environment import cpu_model

IPU_FIELDS = ("board type", "ipu architecture")


def hardware_part(kind: str) -> str:
    """'Intel(R) Xeon(R) ...' for 'cpu', 'NVIDIA H100 ...' for 'cuda', 'board type: C600, ipu
    architecture: ipu21' for 'ipu' (or a note saying why the part could not be read)."""
    if kind == "cpu":
        return cpu_model()
    if kind == "cuda":
        return ", ".join(cuda.visible_gpu_names()) or "no GPU visible"
    if kind == "ipu":
        return ipu_part()
    raise InvalidParameter("hardware", kind, f"one of {', '.join(kinds.KINDS)}")


def ipu_part() -> str:
    """The first IPU's board type and architecture from `gc-info -d 0 -i`."""
    if not shutil.which("gc-info"):
        return "IPU part unknown (no gc-info on PATH)"
    try:
        out = subprocess.run(["gc-info", "-d", "0", "-i"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"IPU part unknown (gc-info: {type(exc).__name__})"
    found = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip().lower() in IPU_FIELDS:
            found[key.strip().lower()] = value.strip()
    return ", ".join(f"{k}: {found[k]}" for k in IPU_FIELDS if k in found) or "IPU part unknown (gc-info said none)"
