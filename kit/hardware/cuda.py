"""NVIDIA GPUs: what nvidia-smi lists, the CUDA device of this process (one per run, through
CUDA_VISIBLE_DEVICES), and whether a CUDA backend really loads here."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware.gpu_install import driver_problem, driver_version
from kit.hardware.onnxruntime_probe import ort_cuda_reason

KIND = "cuda"  # the hardware kind these GPUs are (kit.hardware.kinds.CUDA)


@functools.cache
def gpu_names() -> tuple[str, ...]:
    """NVIDIA GPUs that nvidia-smi lists (empty where there is none or no driver)."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip())


#: What CUDA_VISIBLE_DEVICES and the device order mean for the GPUs nvidia-smi lists.
CUDA_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@dataclass(frozen=True)
class CudaDevice:
    """One CUDA device as this process sees it.

    `index` is the CUDA ordinal inside this process (after CUDA_VISIBLE_DEVICES): what ONNX
    Runtime's `device_id`, IO binding and torch's `cuda:N` take. `pci_bus_id` names the same
    board to NVML, whose indices ignore CUDA_VISIBLE_DEVICES.
    """

    index: int
    pci_bus_id: str  # NVML's form: 00000000:65:00.0
    name: str
    uuid: str = ""
    source: str = ""  # how the ordinal was mapped to the board

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GpuRow:
    """One board as nvidia-smi lists it (PCI bus order, every board, whatever CUDA sees)."""

    smi_index: int
    pci_bus_id: str
    uuid: str
    name: str


def normalise_bus_id(bus_id: str) -> str:
    """'0000:65:00.0' or '00000000:65:00.0' -> '00000000:65:00.0' (NVML's form, lower case)."""
    domain, _, rest = bus_id.strip().lower().rpartition(":")
    domain, bus = domain.rsplit(":", 1) if domain.count(":") else ("0", domain)
    return f"{int(domain, 16):08x}:{int(bus, 16):02x}:{rest}"


def smi_query(fields: str, run: Callable[..., Any] = subprocess.run, units: bool = True) -> str:
    """nvidia-smi's csv rows (no header) of `--query-gpu=fields`; '' without it or on failure."""
    if not shutil.which("nvidia-smi"):
        return ""
    form = "csv,noheader" + ("" if units else ",nounits")
    try:
        out = run(
            ["nvidia-smi", f"--query-gpu={fields}", f"--format={form}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


@functools.cache
def nvidia_smi_gpus() -> tuple[GpuRow, ...]:
    """Every board nvidia-smi lists, in its (PCI bus) order; empty without a driver."""
    return parse_smi_rows(smi_query("index,pci.bus_id,uuid,name"))


def parse_smi_rows(text: str) -> tuple[GpuRow, ...]:
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) == 4 and parts[0].isdigit():
            rows.append(GpuRow(int(parts[0]), normalise_bus_id(parts[1]), parts[2], parts[3]))
    return tuple(rows)


def visible_gpus(
    rows: tuple[GpuRow, ...] | None = None, env: Mapping[str, str] | None = None
) -> list[GpuRow]:
    """The boards this process's CUDA sees, in CUDA ordinal order, honouring CUDA_VISIBLE_DEVICES.

    Entries are ordinals or GPU-UUID prefixes; CUDA stops at the first entry it cannot match, and
    so does this. Ordinals follow PCI bus order when CUDA_DEVICE_ORDER=PCI_BUS_ID or every board
    is the same model (CUDA's default fastest-first order ties break by bus id); on a mixed host
    without that setting the order is unknown here and a KitError says what to set.
    """
    rows = nvidia_smi_gpus() if rows is None else rows
    env = os.environ if env is None else env
    ordered = sorted(rows, key=lambda r: r.pci_bus_id)
    if (
        env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID"
        and len({r.name for r in rows}) > 1
    ):
        raise KitError(
            f"GPUs of different models here ({', '.join(sorted({r.name for r in rows}))}): CUDA's "
            "default fastest-first order cannot be read from nvidia-smi; set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID (or install a CUDA build of torch)"
        )
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return ordered
    chosen: list[GpuRow] = []
    for entry in (e.strip() for e in spec.split(",")):
        match = (
            ordered[int(entry)]
            if entry.isdigit() and int(entry) < len(ordered)
            else next(
                (r for r in ordered if entry.startswith("GPU-") and r.uuid.startswith(entry)), None
            )
        )
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


def parse_free_rows(text: str) -> dict[str, int]:
    """nvidia-smi's `pci.bus_id,memory.free` rows (csv, noheader, nounits: MiB) -> {bus id:
    bytes}."""
    free = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[1].isdigit():
            free[normalise_bus_id(parts[0])] = int(parts[1]) * 2**20
    return free


def first_gpu_free_bytes(run: Callable[..., Any] = subprocess.run) -> float | None:
    """The free memory of the GPU this process's `cuda:0` is (nvidia-smi: other processes' use
    counted, and CUDA not initialised here); None without one or where nvidia-smi cannot say."""
    try:
        visible = visible_gpus()
    except KitError:
        return None
    if not visible:
        return None
    return parse_free_rows(smi_query("pci.bus_id,memory.free", run, units=False)).get(
        visible[0].pci_bus_id
    )


def visible_gpu_names() -> tuple[str, ...]:
    """Names of the GPUs this process can use (CUDA_VISIBLE_DEVICES honoured)."""
    try:
        return tuple(r.name for r in visible_gpus())
    except KitError:
        return gpu_names()


def cuda_device(device_id: int = 0) -> CudaDevice:
    """The CUDA device `device_id` of this process, resolved once per run and environment.

    torch's device properties are the authority when a CUDA build of torch sees devices; else
    nvidia-smi's list read through CUDA_VISIBLE_DEVICES (see `visible_gpus`).
    """
    return _cuda_device(int(device_id), tuple(os.environ.get(k) for k in CUDA_ENV))


@functools.cache
def _cuda_device(device_id: int, _env: tuple) -> CudaDevice:
    if device_id < 0:
        raise InvalidParameter("device_id", device_id, ">= 0 (a CUDA ordinal)")
    torch_device = _torch_cuda_device(device_id)
    if torch_device is not None:
        return torch_device
    visible = visible_gpus()
    if device_id >= len(visible):
        shown = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise BackendUnavailable(
            f"CUDA device {device_id} unavailable: this process sees {len(visible)} GPU(s)"
            + (f" (CUDA_VISIBLE_DEVICES={shown!r})" if shown is not None else "")
        )
    row = visible[device_id]
    return CudaDevice(
        device_id,
        row.pci_bus_id,
        row.name,
        row.uuid,
        source="nvidia-smi (PCI bus order) through CUDA_VISIBLE_DEVICES",
    )


def _torch_cuda_device(device_id: int) -> CudaDevice | None:
    """From torch, when it is a CUDA build and sees devices; None otherwise."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    if device_id >= count:
        raise BackendUnavailable(
            f"CUDA device {device_id} unavailable: torch sees {count} CUDA device(s) "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    p = torch.cuda.get_device_properties(device_id)
    # not in torch's stubs
    bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"  # type: ignore[attr-defined]
    return CudaDevice(
        device_id,
        bus,
        p.name,
        str(getattr(p, "uuid", "") or ""),
        source="torch.cuda.get_device_properties",
    )


@functools.cache
def cuda_backend_loads() -> str | None:
    """None when a CUDA backend really runs here, else why not.

    torch.cuda.is_available() (which honours CUDA_VISIBLE_DEVICES), or an ONNX Runtime session
    whose first provider really is CUDAExecutionProvider: get_available_providers() only lists
    what the package was built with, and ORT falls back to the CPU when CUDA fails to load. A
    driver older than the pinned CUDA builds need is named first: it is the usual cause.
    """
    reasons = []
    try:
        import torch

        if torch.cuda.is_available():
            return None
        reasons.append(f"torch {torch.__version__} sees no CUDA device")
    except ImportError:
        reasons.append("torch is not installed")
    ort_reason = ort_cuda_reason()
    if not ort_reason:
        return None
    driver = driver_problem(driver_version())
    return "; ".join([*([driver] if driver else []), *reasons, ort_reason])


def unused_gpu_reason(kinds: list[str]) -> str | None:
    """Why a run on `kinds` measures no NVIDIA GPU although nvidia-smi lists one, or `cuda` was
    asked for and no CUDA backend loads; None when there is nothing to say."""
    names = gpu_names()
    if not names and KIND not in kinds:
        return None
    reason = cuda_backend_loads()
    if reason is None:
        return None
    listed = f"nvidia-smi lists {', '.join(names)}" if names else "nvidia-smi lists no GPU"
    if KIND in kinds:
        return f"cuda asked for, but no CUDA backend loads here ({listed}): {reason}"
    return f"GPU not used ({listed}; this run measures {', '.join(kinds)}): {reason}"
