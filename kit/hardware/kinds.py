"""The one place that knows the kinds of hardware: each kind is one object here, with its devices,
how it is found, its exact part, what of it enters the search cache key, what `auto` prefers and
what the kit does differently on it. Nothing else in the kit compares kind names.

Kinds are where a study runs: 'cpu', 'cuda' (an NVIDIA GPU, through CUDA or TensorRT) and 'ipu'.
A device is what a backend is asked for ('cpu', 'cuda', 'tensorrt', 'ipu'); every device belongs to
one kind. What the floors above decide per kind (power sensors in kit.measure.power, precision
mappings and candidates in kit.search) they keep in their own tables keyed by the kind's name, so
this floor never imports upward. A new kind is one class and one `register` line here.

>>> kind_of("tensorrt")
'cuda'
>>> resolve("cpu")
'cpu'
>>> get("cuda").hardware_class
'gpu'
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.errors import InvalidParameter
from kit.hardware import cuda, gpu_peaks, ipu, onnxruntime_probe
from kit.hardware.environment import cpu_model, cpu_peak_gflops, usable_cores
from kit.registry import Registry


@dataclass(frozen=True, kw_only=True)
class HardwareKind:
    """A kind of hardware: the data that differs by kind, and the hooks each kind overrides."""

    name: str
    devices: tuple[str, ...]  # what a backend may be asked for on it, its own device first
    hardware_class: str  # 'cpu', 'gpu' or 'ipu': what device_info and the published parts call it
    export_name: str  # ByteMLPerf's word for it in a report's backend name
    preference: int  # `auto` picks the present kind with the highest
    published_settings: bool = False  # True: runs each row's published settings, never searched
    # torch's profiler splits a call by operator (kit.studies.op_breakdown)
    profiles_ops: bool = False
    session_per_device: bool = False  # one replica per device: a C2 run uses min(replicas, devices)
    # calls take milliseconds: the search decides at every published batch
    search_each_batch: bool = False
    # the model rows share one warm kernel: imports, kernel start and the CUDA context paid once
    # (kit.batch.local.WarmWorker), where they are a large part of a short row
    warm_kernel: bool = False

    def present(self) -> bool:
        """Whether this kind can run here (a driver alone is not enough)."""
        raise NotImplementedError

    def missing_here(self) -> str | None:
        """Why a run asked for on this kind cannot start here, None where it can."""
        return None if self.present() else f"no {self.name} found here"

    def part(self) -> str:
        """The exact part behind the kind on this machine, read cheaply without a backend: what a
        result may be reused on."""
        raise NotImplementedError

    def key_facts(self) -> dict:
        """What of this kind, beyond the host CPU, decides which configuration is fastest: part of
        every search decision's cache key."""
        return {"gpus": []}

    def device_info(self, config) -> dict:
        """device_info for an in-process backend's `config` (a kit.backends.base.BackendConfig) on
        it."""
        raise NotImplementedError(f"no in-process backend runs on {self.name}")

    def ort_providers(self) -> list[str]:
        """The optional ONNX Runtime providers a session really starts here on this kind."""
        return []

    def planned_ort_providers(self) -> list[str]:
        """The optional providers a plan counts candidates with: those here, or, where this kind is
        absent here (a run planned for another host), those its install brings."""
        return self.ort_providers()


class Cpu(HardwareKind):
    def present(self) -> bool:
        return True

    def part(self) -> str:
        return cpu_model()

    def device_info(self, config) -> dict:
        return {
            "kind": self.hardware_class,
            "name": cpu_model(),
            "cores": usable_cores(),
            "peak": cpu_peak_gflops(config.precision),
        }


class Cuda(HardwareKind):
    def present(self) -> bool:
        # a driver alone is not a backend
        return bool(cuda.gpu_names()) and cuda.cuda_backend_loads() is None

    def part(self) -> str:
        return ", ".join(cuda.visible_gpu_names()) or "no GPU visible"

    def missing_here(self) -> str | None:
        return cuda.unused_gpu_reason([self.name])

    def key_facts(self) -> dict:
        return {"gpus": list(cuda.gpu_names())}

    def device_info(self, config) -> dict:
        return gpu_peaks.gpu_device_info(config)

    def ort_providers(self) -> list[str]:
        return onnxruntime_probe.usable_gpu_providers()

    def planned_ort_providers(self) -> list[str]:
        # the GPU install (requirements-gpu.txt) brings onnxruntime-gpu and TensorRT's libraries
        if self.present():
            return self.ort_providers()
        return list(onnxruntime_probe.OPTIONAL_GPU_PROVIDERS)


class Ipu(HardwareKind):
    def present(self) -> bool:
        return ipu.ipu_present()

    def missing_here(self) -> str | None:
        return ipu.missing_reason()

    def part(self) -> str:
        return ipu.ipu_part()


REGISTRY: Registry[HardwareKind] = Registry("hardware kind")
CPU = REGISTRY.register(
    "cpu",
    Cpu(
        name="cpu",
        devices=("cpu",),
        hardware_class="cpu",
        export_name="CPU",
        preference=0,
        profiles_ops=True,
    ),
)
CUDA = REGISTRY.register(
    cuda.KIND,
    Cuda(
        name=cuda.KIND,
        devices=("cuda", "tensorrt"),
        hardware_class="gpu",
        export_name="GPU",
        preference=1,
        search_each_batch=True,
        warm_kernel=True,
    ),
)
IPU = REGISTRY.register(
    "ipu",
    Ipu(
        name="ipu",
        devices=("ipu",),
        hardware_class="ipu",
        export_name="IPU",
        preference=2,
        published_settings=True,
        session_per_device=True,
    ),
)

KINDS = tuple(REGISTRY)
CHOICES = ("auto", *KINDS)
# what `auto` picks, best first
PREFERENCE = tuple(sorted(KINDS, key=lambda k: -REGISTRY.get(k).preference))
DEVICE_KIND = {d: k for k in KINDS for d in REGISTRY.get(k).devices}
DEVICES = tuple(DEVICE_KIND)
#: The class a figure's hardware belongs to, as device_info reports it.
KIND_CLASS = {k: REGISTRY.get(k).hardware_class for k in KINDS}


def get(kind: str) -> HardwareKind:
    """The kind object named `kind` ('cpu', 'cuda', 'ipu')."""
    if kind not in REGISTRY:
        raise InvalidParameter("hardware", kind, f"one of {', '.join(KINDS)}")
    return REGISTRY.get(kind)


def of_class(hardware_class: str) -> HardwareKind | None:
    """The kind whose device_info calls itself `hardware_class` ('gpu' -> cuda), None if none
    does."""
    return next(
        (REGISTRY.get(k) for k in KINDS if REGISTRY.get(k).hardware_class == hardware_class), None
    )


def present() -> list[str]:
    """The kinds present here: always 'cpu', plus 'cuda' and 'ipu' when found."""
    return [k for k in KINDS if REGISTRY.get(k).present()]


def part(kind: str) -> str:
    """'Intel(R) Xeon(R) ...' for 'cpu', 'NVIDIA H100 ...' for 'cuda', 'board type: C600, ipu
    architecture: ipu21' for 'ipu' (or a note saying why the part could not be read)."""
    return get(kind).part()


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
    return KIND_CLASS.get(
        kind_or_class, kind_or_class if kind_or_class in KIND_CLASS.values() else "other"
    )
