"""Nominal GPU peaks per precision, from the table in data/gpu/peaks.csv (with its sources).

>>> peak_for("NVIDIA A100-SXM4-80GB", "fp16")["gflops"]
312000.0
>>> peak_for("NVIDIA A10", "fp16")["gflops"]
125000.0
>>> peak_for("Some Unknown GPU", "fp32") is None
True
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass

from kit.errors import KitError
from kit.hardware.cuda import cuda_device, visible_gpu_names
from kit.paths import data_dir

#: The table row used for each kit precision.
TABLE_PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "int8": "int8", "fp8": "fp8"}


@dataclass(frozen=True)
class PeakRow:
    pattern: str
    gpu: str
    precision: str
    tflops_dense: float
    source: str


@functools.cache
def peak_table() -> tuple[PeakRow, ...]:
    with open(data_dir() / "gpu" / "peaks.csv", newline="") as f:
        return tuple(PeakRow(r["pattern"], r["gpu"], r["precision"], float(r["tflops_dense"]), r["source"])
                     for r in csv.DictReader(f))


def match_gpu(name: str) -> str | None:
    """The table's GPU for an NVML name ('NVIDIA H100 PCIe' -> 'H100 PCIe'), or None."""
    row = next((r for r in peak_table() if re.search(r.pattern, name, re.IGNORECASE)), None)
    return row.gpu if row else None


def peak_for(name: str, precision: str) -> dict | None:
    """{'gflops', 'precision', 'method'} for this GPU at `precision`, or None when not tabled."""
    gpu = match_gpu(name)
    wanted = TABLE_PRECISION.get(precision)
    row = next((r for r in peak_table() if r.gpu == gpu and r.precision == wanted), None)
    if row is None:
        return None
    tf32 = next((r.tflops_dense for r in peak_table() if r.gpu == gpu and r.precision == "tf32"), None)
    note = (f"; TF32 tensor cores ({tf32:g} TFLOPS) may run fp32 models faster than this"
            if precision == "fp32" and tf32 else "")
    return {"gflops": row.tflops_dense * 1000, "precision": precision,
            "method": f"{row.gpu} dense {row.precision} peak, {row.tflops_dense:g} TFLOPS ({row.source}){note}"}


def gpu_device_info(config) -> dict:
    """device_info for a CUDA device: the run's GPU (CUDA_VISIBLE_DEVICES honoured) and its peak."""
    ordinal = config.options.get("device_id", 0)
    try:
        gpu = cuda_device(ordinal)
    except KitError as exc:
        return {"kind": "gpu", "name": ", ".join(visible_gpu_names()) or "unknown GPU", "peak": None,
                "note": str(exc)}
    peak = peak_for(gpu.name, config.precision)
    info = {"kind": "gpu", "name": gpu.name, "cuda_device": gpu.to_dict(), "peak": peak}
    if peak is None:
        info["note"] = f"no peak tabled for {gpu.name} at {config.precision} (data/gpu/peaks.csv)"
    return info
