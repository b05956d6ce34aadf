"""Which precision the published IPU rows run at on the present hardware, and why.

The IPU figures are FP16 or FP8. Elsewhere the kit runs the fastest comparable type the device
has natively: FP16 rows -> bf16 on a CPU with avx512_bf16/AMX (through torch; ONNX Runtime has no
bf16 CPU path) or fp16 on a GPU; FP8 rows -> int8 on a CPU (VNNI) and, on a GPU, int8 through
TensorRT (the kit has no fp8 execution path yet, even on GPUs that have fp8 units).

>>> map_precision("FP8", "cpu").placement.precision
<RunPrecision.INT8: 'int8'>
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kit.backends import Placement
from kit.hardware import kinds as hw
from kit.hardware.environment import cpu_flags, int8_saturates
from kit.models.spec import Framework
from kit.precision import PublishedPrecision as Pub
from kit.precision import RunPrecision as Run

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
FP16_FLAGS = ("avx512_fp16", "amx_fp16")


@dataclass(frozen=True)
class PrecisionChoice:
    """Where a published row runs here (`placement`: the backend's default options and threads),
    and the reason in words."""

    placement: Placement
    note: str


def map_precision(
    published: str | Pub,
    hardware: str,
    *,
    framework: Framework | str = Framework.TORCH,
    flags: Iterable[str] | None = None,
    gpu_providers: Iterable[str] = (),
) -> PrecisionChoice:
    """The backend/precision/device for a published precision on `hardware` ('cpu', 'cuda', 'ipu').

    `framework` is the zoo entry's (a torch module can use the torch backend), `flags` the CPU
    flags (default: this machine's), `gpu_providers` the ONNX Runtime providers present.
    """
    kind = hw.get(hardware).name
    return MAPPINGS[kind](
        Pub.parse(published),
        Framework.parse(framework),
        frozenset(cpu_flags() if flags is None else flags),
        set(gpu_providers),
    )


def _map_ipu(
    published: Pub, framework: Framework, flags: frozenset[str], providers: set[str]
) -> PrecisionChoice:
    return PrecisionChoice(
        Placement("ipu", published.as_run, "ipu"), f"{published} as published (PopRT on the IPU)"
    )


def _map_cpu(
    published: Pub, framework: Framework, flags: frozenset[str], providers: set[str]
) -> PrecisionChoice:
    if published is Pub.FP32:
        return PrecisionChoice(Placement("onnxruntime", Run.FP32, "cpu"), "FP32 as published")
    if published is Pub.FP8:
        vnni = (
            "with VNNI int8 dot products"
            if not int8_saturates(flags)
            else "without VNNI (slower int8)"
        )
        return PrecisionChoice(
            Placement("onnxruntime", Run.INT8, "cpu"),
            f"IPU FP8 -> int8 on this CPU {vnni}: no CPU has fp8 arithmetic",
        )
    if flags & set(FP16_FLAGS) and framework.torch_module:
        return PrecisionChoice(
            Placement("torch", Run.FP16, "cpu"),
            "IPU FP16 -> fp16 (native on this CPU), torch autocast",
        )
    if flags & set(BF16_FLAGS):
        if framework.torch_module:
            return PrecisionChoice(
                Placement("torch", Run.BF16, "cpu"),
                "IPU FP16 -> bf16, this CPU's native 16-bit type (torch autocast, "
                "channels_last for CNNs); fp16 here would be emulated",
            )
        return PrecisionChoice(
            Placement("onnxruntime", Run.FP16, "cpu"),
            f"IPU FP16 -> fp16 via ONNX Runtime: a {framework} model cannot use the torch "
            "bf16 path and ORT has no bf16 CPU kernels; fp16 is converted, not native, here",
        )
    return PrecisionChoice(
        Placement("onnxruntime", Run.FP32, "cpu"),
        "IPU FP16 -> fp32: this CPU has no native 16-bit arithmetic, so fp32 is its fastest type",
    )


def _map_gpu(
    published: Pub, framework: Framework, flags: frozenset[str], providers: set[str]
) -> PrecisionChoice:
    backend = "torch" if framework.torch_module else "onnxruntime"
    if published is Pub.FP32:
        return PrecisionChoice(Placement(backend, Run.FP32, "cuda"), "FP32 as published")
    if published is Pub.FP16:
        return PrecisionChoice(Placement(backend, Run.FP16, "cuda"), "IPU FP16 -> fp16 on the GPU")
    if "TensorrtExecutionProvider" in providers:
        return PrecisionChoice(
            Placement("onnxruntime", Run.INT8, "tensorrt"),
            "IPU FP8 -> int8 through TensorRT (the kit has no fp8 path yet)",
        )
    return PrecisionChoice(
        Placement(backend, Run.FP16, "cuda"),
        "IPU FP8 -> fp16 on the GPU: no TensorRT for int8 and no fp8 path in the kit",
    )


#: What each published precision runs at, by hardware kind (kit.hardware.kinds): (published,
#: framework, CPU flags, ONNX Runtime providers) -> the choice.
MAPPINGS: dict[str, Callable[[Pub, Framework, frozenset[str], set[str]], PrecisionChoice]] = {
    hw.CPU.name: _map_cpu,
    hw.CUDA.name: _map_gpu,
    hw.IPU.name: _map_ipu,
}


def mapping_sentence(
    hardware: str | None = None,
    flags: Iterable[str] | None = None,
    framework: Framework | str = Framework.TORCH,
) -> str:
    """The sentence every report prints about precisions on `hardware` (default: the best here)."""
    hardware = hardware or hw.best_present()
    if hw.get(hardware).published_settings:
        return "Precision: the IPU runs each row at its published precision (FP16 or FP8)."
    fp16 = map_precision(Pub.FP16, hardware, framework=framework, flags=flags)
    fp8 = map_precision(Pub.FP8, hardware, framework=framework, flags=flags)
    fp16_at, fp8_at = fp16.placement, fp8.placement
    return (
        f"Precision mapping: the published IPU FP16 rows run here as {fp16_at.precision} "
        f"({fp16_at.backend}, {fp16_at.device}) and the FP8 rows as {fp8_at.precision} "
        f"({fp8_at.backend}, {fp8_at.device}): each device's fastest comparable type, not "
        f"identical arithmetic. {fp16.note}. {fp8.note}."
    )
