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
from dataclasses import asdict, dataclass, field

from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware.gpu_install import driver_problem, driver_version
from kit.hardware.onnxruntime_probe import ort_cuda_reason

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
    if gpu_names() and cuda_backend_loads() is None:  # a driver alone is not a CUDA backend
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


@dataclass(frozen=True)
class Part:
    """An exact Graphcore part: figures reproduce only on the same part."""

    key: str
    name: str
    ipu_version: str  # PopRT's name for the target; "" where PopRT cannot target it
    note: str = ""
    board_words: tuple[str, ...] = ()  # what gc-info's "board type" / "board variant" say on it
    peaks_gflops: dict = field(default_factory=dict)  # per IPU, by precision (Graphcore's datasheets)

    def to_dict(self) -> dict:
        return asdict(self)


#: Env variable naming the part where the board cannot tell (an M2000 and a Bow are both `ipu2`).
PART_ENV = "KIT_IPU_PART"

PARTS = {p.key: p for p in (
    Part("gc2", "Graphcore GC2 (Mk1) IPU, C2 card", "",
         "PopRT cannot target Mk1; the C2 paper used PopART from SDK 1.0", ("C2",),
         {"fp32": 31.1e3, "fp16": 124.5e3}),
    Part("c600", "Graphcore C600 (Mk2, ipu21)", "ipu21", board_words=("C600",),
         peaks_gflops={"fp32": 70e3, "fp16": 280e3, "fp8": 560e3}),
    Part("m2000", "Graphcore GC200 (Mk2, ipu2) in an IPU-M2000", "ipu2", board_words=("M2000",),
         peaks_gflops={"fp32": 62.5e3, "fp16": 250e3}),
    Part("bow", "Graphcore Bow IPU (Mk2, ipu2) in a Bow-2000", "ipu2",
         "a GC200 die stacked with a power-delivery wafer (wafer-on-wafer), clocked 1.85 GHz instead of 1.33",
         board_words=("Bow",), peaks_gflops={"fp32": 87.5e3, "fp16": 350e3}),
)}


def part_for_ipu_version(ipu_version: str | None, board: str | None = None,
                         env: dict[str, str] | None = None) -> Part | None:
    """The part PopRT reports as `ipu_version` ('ipu21' -> C600); for `ipu2`, shared by the M2000 and
    the Bow, the one whose name the board's type or variant (gc-info) carries ('Bow' wins over
    'M2000'), else the part named by KIT_IPU_PART; None when unknown or undecided."""
    candidates = [p for p in PARTS.values() if p.ipu_version and p.ipu_version == ipu_version]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    text = (board or "").lower()
    for part in reversed(candidates):  # the most specific first: a Bow board may also say M2000
        if any(w.lower() in text for w in part.board_words):
            return part
    named = (os.environ if env is None else env).get(PART_ENV, "")
    if named:
        if named not in {p.key for p in candidates}:
            raise InvalidParameter(PART_ENV, named, f"one of {', '.join(p.key for p in candidates)} "
                                                    f"(the parts PopRT calls {ipu_version})")
        return PARTS[named]
    return None


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


# ---------------------------------------------------------------- CUDA devices (one per run)

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


@functools.cache
def nvidia_smi_gpus() -> tuple[GpuRow, ...]:
    """Every board nvidia-smi lists, in its (PCI bus) order; empty without a driver."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,pci.bus_id,uuid,name",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return parse_smi_rows(out.stdout) if out.returncode == 0 else ()


def parse_smi_rows(text: str) -> tuple[GpuRow, ...]:
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) == 4 and parts[0].isdigit():
            rows.append(GpuRow(int(parts[0]), normalise_bus_id(parts[1]), parts[2], parts[3]))
    return tuple(rows)


def visible_gpus(rows: tuple[GpuRow, ...] | None = None, env: dict | None = None) -> list[GpuRow]:
    """The boards this process's CUDA sees, in CUDA ordinal order, honouring CUDA_VISIBLE_DEVICES.

    Entries are ordinals or GPU-UUID prefixes; CUDA stops at the first entry it cannot match, and
    so does this. Ordinals follow PCI bus order when CUDA_DEVICE_ORDER=PCI_BUS_ID or every board
    is the same model (CUDA's default fastest-first order ties break by bus id); on a mixed host
    without that setting the order is unknown here and a KitError says what to set.
    """
    rows = nvidia_smi_gpus() if rows is None else rows
    env = os.environ if env is None else env
    ordered = sorted(rows, key=lambda r: r.pci_bus_id)
    if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID" and len({r.name for r in rows}) > 1:
        raise KitError(f"GPUs of different models here ({', '.join(sorted({r.name for r in rows}))}): CUDA's "
                       "default fastest-first order cannot be read from nvidia-smi; set "
                       "CUDA_DEVICE_ORDER=PCI_BUS_ID (or install a CUDA build of torch)")
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return ordered
    chosen: list[GpuRow] = []
    for entry in (e.strip() for e in spec.split(",")):
        match = (ordered[int(entry)] if entry.isdigit() and int(entry) < len(ordered) else
                 next((r for r in ordered if entry.startswith("GPU-") and r.uuid.startswith(entry)), None))
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


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
        raise BackendUnavailable(f"CUDA device {device_id} unavailable: this process sees {len(visible)} GPU(s)"
                                 + (f" (CUDA_VISIBLE_DEVICES={shown!r})" if shown is not None else ""))
    row = visible[device_id]
    return CudaDevice(device_id, row.pci_bus_id, row.name, row.uuid,
                      source="nvidia-smi (PCI bus order) through CUDA_VISIBLE_DEVICES")


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
        raise BackendUnavailable(f"CUDA device {device_id} unavailable: torch sees {count} CUDA device(s) "
                                 f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    p = torch.cuda.get_device_properties(device_id)
    bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    return CudaDevice(device_id, bus, p.name, str(getattr(p, "uuid", "") or ""),
                      source="torch.cuda.get_device_properties")


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
    if not names and "cuda" not in kinds:
        return None
    reason = cuda_backend_loads()
    if reason is None:
        return None
    listed = f"nvidia-smi lists {', '.join(names)}" if names else "nvidia-smi lists no GPU"
    if "cuda" in kinds:
        return f"cuda asked for, but no CUDA backend loads here ({listed}): {reason}"
    return f"GPU not used ({listed}; this run measures {', '.join(kinds)}): {reason}"
