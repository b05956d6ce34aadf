"""Provenance: the hardware and software a figure was measured on, captured automatically."""

from __future__ import annotations

import ast
import datetime as dt
import functools
import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path
from typing import TypeGuard

from kit.errors import BackendUnavailable
from kit.hardware import cuda
from kit.hardware.cpu import (
    cpuinfo_flags,
    cpuinfo_values,
    our_cpus,
    physical_cores,
    thread_settings,
)
from kit.hardware.ipu import ipu_present
from kit.hardware.source import distributions, job, kit_source, published_data_hashes

PACKAGES = (
    "kit",
    "ipu-repro",
    "numpy",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "torch",
    "tensorflow-cpu",
    "tf2onnx",
    "transformers",
    "openvino",
    "nncf",
    "papermill",
    "nbconvert",
    "pandas",
    "mlcommons-loadgen",
    "poprt",
    "nvidia-ml-py",
    "tensorrt",
    "tensorrt-cu12",
    "tensorrt-cu13",
)
#: The distributions that install the `onnxruntime` module: the CPU build or the GPU build.
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu")
#: Where TensorRT's libraries come from, the library wheels first: ORT's TensorRT provider loads
#: libnvinfer.so.10 from tensorrt-cu13-libs 10.x even where the `tensorrt` 11.x metapackage is
#: there.
TENSORRT_DISTRIBUTIONS = (
    "tensorrt-cu13-libs",
    "tensorrt-cu12-libs",
    "tensorrt-libs",
    "tensorrt-cu13",
    "tensorrt-cu12",
    "tensorrt",
)


@functools.cache
def cpu_model() -> str:
    names = cpuinfo_values("model name")
    return names[0] if names else platform.processor() or platform.machine()


@functools.cache
def cpu_flags() -> frozenset[str]:
    return cpuinfo_flags()


#: the x86 flags of an int8 dot product that accumulates in 32 bits (VNNI, AMX's tiles)
INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def int8_saturates(flags: frozenset[str] | None = None) -> bool:
    """Whether ONNX Runtime's x86 int8 kernels may saturate on this CPU: without VNNI or AMX they
    multiply u8 x s8 pairs into a 16-bit sum that clips (VPMADDUBSW), and ONNX Runtime's
    quantisation guide's remedy is 7-bit weights (`reduce_range`). A MatMul of 64 inputs was off
    by 13 % (dynamic) and 29 % (static QDQ) of its largest output on an AVX2-only EPYC (Zen 3) at
    8-bit weights, by 2 % at 7-bit."""
    return not (cpu_flags() if flags is None else flags) & set(INT8_DOT_FLAGS)


def usable_cpus() -> int:
    """The logical CPUs this process may run on (SMT siblings counted apart): what a load average
    is compared with."""
    return len(our_cpus())


def usable_cores() -> int:
    """The physical cores under the CPUs this process may run on: an SMT sibling shares its core's
    vector units, so a nominal peak counts cores, and the backends' default thread count is one per
    core, as ONNX Runtime's and PyTorch's defaults and OpenVINO's LATENCY hint are (threads on
    both siblings of a core oversubscribe it). The usable CPUs where sysfs gives no topology."""
    return physical_cores(our_cpus())


def fp32_flops_per_cycle(flags: frozenset[str], vendor: str, family: int) -> float:
    """Two FMA pipes x vector lanes x 2 FLOP. AMD Zen 4 (family 25) splits 512-bit ops into two
    256-bit halves (32/cycle); Zen 5 (family 26) and Intel server cores have full 512-bit FMA
    (64)."""
    if "avx512f" in flags and (vendor != "AuthenticAMD" or family >= 26):
        return 64.0
    if "avx2" in flags or "avx512f" in flags:
        return 32.0
    return 8.0


PEAK_PRECISIONS = ("fp32", "bf16", "fp16", "int8")
PEAK_SOURCE = (
    "nominal: instruction rate from /proc/cpuinfo flags and the CPU family, at the clock in "
    "cpufreq's cpuinfo_max_freq (else /proc/cpuinfo 'cpu MHz'), times the usable cores"
)


def precision_rate(precision: str, flags: frozenset[str]) -> tuple[float, bool, str]:
    """(multiple of the fp32 FMA rate, native?, why) for `precision` on a CPU with `flags`.

    bf16 dot products (avx512_bf16 VDPBF16PS) do 2 multiply-adds per 32-bit lane; fp16 is native
    only with avx512_fp16 (2 per lane), else converted to fp32; int8 VNNI (VPDPBUSD) does 4 per
    32-bit lane, counted as 2 operations each (GOPS, not FLOP/s). Where the CPU has AMX tiles for
    the precision, `amx_rate` gives the peak instead.
    """
    if precision in ("bf16",) and "avx512_bf16" in flags:
        return 2.0, True, "avx512_bf16: 2 bf16 multiply-adds per 32-bit lane"
    if precision == "fp16" and "avx512_fp16" in flags:
        return 2.0, True, "avx512_fp16: 32 fp16 lanes per 512-bit vector"
    if precision in ("int8", "fp8") and flags & {"avx512_vnni", "avx_vnni"}:
        return 4.0, True, "VNNI: 4 int8 multiply-adds per 32-bit lane; int8 operations, not FLOPs"
    if precision in ("bf16", "fp16", "int8", "fp8"):
        return 1.0, False, f"no native {precision} arithmetic: converted to fp32, so the fp32 rate"
    return 1.0, True, "fp32 FMA"


# AMX's tile multiply (TMUL) per core and cycle: TDPBSSD multiplies 16x64 int8 by 64x16 (16,384
# multiply-adds) and TDPBF16PS / TDPFP16PS 16x32 by 32x16 (8,192) every 16 cycles, i.e. 2,048 int8
# operations and 1,024 bf16 or fp16 FLOP (Intel's Sapphire Rapids figures). Without it the peak of
# an AMX CPU was the AVX-512 one, and OpenVINO's bf16/int8 runs read 132-185 % of "the peak".
AMX_OPS_PER_CYCLE = {
    "bf16": ("amx_bf16", 1024.0),
    "fp16": ("amx_fp16", 1024.0),
    "int8": ("amx_int8", 2048.0),
    "fp8": ("amx_int8", 2048.0),
}


def amx_rate(precision: str, flags: frozenset[str]) -> tuple[float, str] | None:
    """(operations per cycle and core, why) of AMX's tiles at `precision`; None where the CPU has no
    AMX for it."""
    flag, per_cycle = AMX_OPS_PER_CYCLE.get(precision, ("", 0.0))
    if not flag or flag not in flags:
        return None
    unit = "int8 operations" if precision in ("int8", "fp8") else f"{precision} FLOP"
    return per_cycle, f"{flag}: AMX tiles, {per_cycle:,.0f} {unit} per cycle"


def cpu_peak_gflops(precision: str = "fp32") -> dict:
    """Nominal peak of the usable cores at the reported clock, with the method and source.

    int8 is in GOPS (2 operations per multiply-add, as FLOPs are counted), stated separately from
    the floating-point peaks. A CPU that boosts above its reported clock can exceed this figure.
    """
    flags = cpu_flags()
    ghz = _max_ghz()
    base = fp32_flops_per_cycle(flags, *cpu_vendor_family())
    factor, native, why = precision_rate(precision, flags)
    per_cycle = base * factor
    amx = amx_rate(precision, flags)
    if amx is not None:
        (per_cycle, why), native = amx, True
    peak = per_cycle * ghz * usable_cores()
    unit = "GOPS" if precision in ("int8", "fp8") else "GFLOP/s"
    return {
        "gflops": round(peak, 1),
        "precision": precision,
        "unit": unit,
        "native": native,
        "method": f"{per_cycle:g} {'op' if unit == 'GOPS' else 'FLOP'}/cycle/core ({why}) x "
        f"{ghz:.2f} GHz (reported clock; boost can exceed it) x {usable_cores()} cores",
        "source": PEAK_SOURCE,
    }


def cpu_peaks() -> list[dict]:
    """The nominal peak at every precision (fp32, bf16, fp16, int8), each with method and source."""
    return [cpu_peak_gflops(p) for p in PEAK_PRECISIONS]


@functools.cache
def cpu_vendor_family() -> tuple[str, int]:
    vendors, families = cpuinfo_values("vendor_id"), cpuinfo_values("cpu family")
    try:
        family = int(families[0]) if families else 0
    except ValueError:
        family = 0
    return (vendors[0] if vendors else ""), family


def _max_ghz() -> float:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            return int(f.read()) / 1e6
    except (OSError, ValueError):
        pass
    try:
        return float(cpuinfo_values("cpu MHz")[0]) / 1000
    except (IndexError, ValueError):
        return 2.6


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed version of each of `names` (left out where not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def capture() -> dict:
    """Everything a result needs to say where it came from: the machine, the key packages
    (`packages`) and every installed distribution (`distributions`), the kit's commit (`kit`),
    the published data's hashes and the job that ran (`job`: command, parameters, notebook hash)."""
    return {
        "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": {
            "model": cpu_model(),
            "cores": usable_cores(),
            "cpus": usable_cpus(),
            "peak_fp32": cpu_peak_gflops("fp32"),
        },
        "gpus": list(cuda.visible_gpu_names()),
        "gpu": gpu_facts(),
        "ipu_present": ipu_present(),
        "packages": package_versions(),
        "threads": thread_settings(),
        "kit": kit_source(),
        "distributions": distributions(),
        "published_data": published_data_hashes(),
        "job": job(),
    }


def distribution_version(*names: str) -> str | None:
    """The version of the first of `names` that is installed, else None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def onnxruntime_version() -> str:
    """ONNX Runtime's version whichever build installed it (onnxruntime or onnxruntime-gpu)."""
    version = distribution_version(*ORT_DISTRIBUTIONS)
    if version is None:
        try:
            import onnxruntime
        except ImportError:
            raise BackendUnavailable(
                "ONNX Runtime backend unavailable: neither onnxruntime nor "
                "onnxruntime-gpu is installed"
            ) from None
        version = onnxruntime.__version__
    return version


def gpu_facts() -> dict:
    """The GPU software and the GPUs this process can use (CUDA_VISIBLE_DEVICES honoured):
    driver, CUDA, cuDNN and TensorRT versions, each None where absent, with where it was read."""
    facts: dict = {
        "visible": [],
        "driver": None,
        "cuda_driver": None,
        "cuda_runtime_torch": None,
        "cudnn_torch": None,
        "onnxruntime_build": distribution_version(*ORT_DISTRIBUTIONS[::-1]),
        "onnxruntime_distribution": next(
            (d for d in ORT_DISTRIBUTIONS[::-1] if distribution_version(d)), None
        ),
        "tensorrt": distribution_version(*TENSORRT_DISTRIBUTIONS),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    try:
        facts["visible"] = [
            {"index": i, "name": r.name, "pci_bus_id": r.pci_bus_id, "uuid": r.uuid}
            for i, r in enumerate(cuda.visible_gpus())
        ]
    except Exception as exc:  # noqa: BLE001
        # a mixed host without CUDA_DEVICE_ORDER: say so, keep going
        facts["visible_error"] = str(exc)
    facts.update(_nvml_versions())
    facts.update(_torch_cuda_versions())
    return facts


def _nvml_versions() -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver or no nvidia-ml-py: the versions stay None
        return {}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "driver": driver.decode() if isinstance(driver, bytes) else str(driver),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
        }
    except Exception:  # noqa: BLE001
        return {}
    finally:
        pynvml.nvmlShutdown()


def _torch_cuda_versions() -> dict:
    """torch's CUDA runtime and cuDNN; a CPU build of torch (its version.py says cuda None) is not
    imported for it (2.6 s of a CPU job that runs OpenVINO on a 2-core EPYC)."""
    if "torch" not in sys.modules and torch_build_cuda() is None:
        # no torch, or a CPU build: both None
        return {}
    try:
        import torch
    except ImportError:
        return {}
    cudnn = (
        torch.backends.cudnn.version()
        if torch.version.cuda and torch.backends.cudnn.is_available()
        else None
    )
    return {"cuda_runtime_torch": torch.version.cuda, "cudnn_torch": cudnn}


def torch_build_cuda(package: str = "torch") -> str | None:
    """The CUDA version torch was built for, read from its version.py without importing torch; None
    for a CPU build, "unknown" where the file cannot be read that way (then torch is imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        tree = ast.parse(
            (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
        )
        return ast.literal_eval(
            next(
                node.value
                for node in tree.body
                if _assigns(node, "cuda") and node.value is not None
            )
        )
    except (OSError, SyntaxError, StopIteration, TypeError, ValueError):
        return "unknown"


def _assigns(node: ast.stmt, name: str) -> TypeGuard[ast.Assign | ast.AnnAssign]:
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign)
        else []
    )
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)
