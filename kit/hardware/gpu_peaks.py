"""Nominal GPU peaks per precision and unit, from the table in data/gpu/peaks.csv, and nominal
memory bandwidths from data/gpu/bandwidth.csv (both with their sources). `peak_for` takes the
arithmetic that ran ('tf32': fp32 models on tensor cores; 'fp32': the CUDA cores), so a figure is
placed against the unit that computed it.

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

#: The table row used for each kit precision, and for TF32 (fp32 on tensor cores).
TABLE_PRECISION = {
    "fp32": "fp32",
    "tf32": "tf32",
    "fp16": "fp16",
    "bf16": "bf16",
    "int8": "int8",
    "fp8": "fp8",
}
UNIT = {
    "fp32": "CUDA cores (fp32, no tensor cores)",
    "tf32": "tensor cores (TF32)",
    "fp16": "tensor cores (fp16)",
    "bf16": "tensor cores (bf16)",
    "int8": "tensor cores (int8)",
    "fp8": "tensor cores (fp8)",
}


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
        return tuple(
            PeakRow(r["pattern"], r["gpu"], r["precision"], float(r["tflops_dense"]), r["source"])
            for r in csv.DictReader(f)
        )


def match_gpu(name: str) -> str | None:
    """The table's GPU for an NVML name ('NVIDIA H100 PCIe' -> 'H100 PCIe'), or None."""
    row = next((r for r in peak_table() if re.search(r.pattern, name, re.IGNORECASE)), None)
    return row.gpu if row else None


def peak_for(name: str, precision: str) -> dict | None:
    """{'gflops', 'precision', 'method'} for this GPU at `precision`, or None when not tabled."""
    gpu = match_gpu(name)
    wanted = TABLE_PRECISION.get(precision)
    row = next((r for r in peak_table() if r.gpu == gpu and r.precision == wanted), None)
    if row is None or wanted is None:
        return None
    tf32 = next(
        (r.tflops_dense for r in peak_table() if r.gpu == gpu and r.precision == "tf32"), None
    )
    note = (
        f"; TF32 tensor cores ({tf32:g} TFLOPS) may run fp32 models faster than this"
        if precision == "fp32" and tf32
        else ""
    )
    return {
        "gflops": row.tflops_dense * 1000,
        "precision": precision,
        "unit": UNIT[wanted],
        "method": f"{row.gpu} dense {row.precision} peak on {UNIT[wanted]}, {row.tflops_dense:g} "
        f"TFLOPS ({row.source}){note}",
    }


@functools.cache
def bandwidth_table() -> tuple[tuple[str, str, float, str], ...]:
    with open(data_dir() / "gpu" / "bandwidth.csv", newline="") as f:
        return tuple(
            (r["pattern"], r["gpu"], float(r["gbs"]), r["source"]) for r in csv.DictReader(f)
        )


def bandwidth_for(name: str) -> dict | None:
    """{'gbs', 'method'}: the GPU's nominal memory bandwidth (datasheet), or None when not tabled.

    >>> bandwidth_for("NVIDIA H200")["gbs"]
    4800.0
    """
    row = next((r for r in bandwidth_table() if re.search(r[0], name, re.IGNORECASE)), None)
    if row is None:
        return None
    return {
        "gbs": row[2],
        "method": f"nominal: {row[1]} memory bandwidth {row[2]:g} GB/s ({row[3]}), not measured",
    }


def gpu_device_info(config) -> dict:
    """device_info for a CUDA device: the run's GPU (CUDA_VISIBLE_DEVICES honoured) and its peak."""
    ordinal = config.device_id or 0
    try:
        gpu = cuda_device(ordinal)
    except KitError as exc:
        return {
            "kind": "gpu",
            "name": ", ".join(visible_gpu_names()) or "unknown GPU",
            "peak": None,
            "note": str(exc),
        }
    peak = peak_for(gpu.name, config.precision)
    info = {"kind": "gpu", "name": gpu.name, "cuda_device": gpu.to_dict(), "peak": peak}
    if peak is None:
        info["note"] = f"no peak tabled for {gpu.name} at {config.precision} (data/gpu/peaks.csv)"
    return info
