"""The configurations a row's search measures on the hardware at hand, each with its precision class
and whether its arithmetic is native here.

CPU: ONNX Runtime fp32/fp16/int8 with graph-optimisation and thread settings; OpenVINO f32, the
native 16-bit inference precisions and NNCF int8 with the LATENCY (and, full, THROUGHPUT) hint;
PyTorch (zoo models built in torch) fp32/bf16/fp16/int8, eager and torch.compile (inductor). GPU:
ONNX Runtime CUDA (IO binding, its CUDA graph) and TensorRT, PyTorch CUDA (16-bit weights, CUDA
graphs, clients, torch.compile). `depth` says which search first measures a candidate: 'quick'
candidates are measured by every search, 'full' ones (torch.compile's minutes of compilation; extra
thread and graph settings) only by a full search.

>>> [c.label for c in row_candidates("onnx", "cpu", flags={"avx512_bf16"}, cores=2)][:2]
['onnxruntime fp32 (cpu)', 'onnxruntime fp32 graph=EXTENDED (cpu)']
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from kit.backends import Placement
from kit.backends.placement import flat_dict
from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.hardware.environment import cpu_flags, int8_saturates, usable_cores
from kit.models.spec import Framework
from kit.search.precision_map import BF16_FLAGS, FP16_FLAGS

DEPTHS = ("quick", "full")
#: torch eager fp32 in a quick search: the same model's fp32 is timed through ONNX Runtime and
#: OpenVINO, and eager fp32 was the slowest of the three on every FP16 row measured here (Zen 4)
TORCH_FP32_QUICK = (
    "fp32 is timed through ONNX Runtime and OpenVINO on the same model; torch eager fp32 was the "
    "slowest of the three on every row measured (a full search measures it)"
)
#: torch's dynamic int8 (Linear layers only) in a quick search: NNCF's static int8 of the whole
#: graph beat it on all three FP8 rows measured here (Zen 4), so it stands in only where that fails
TORCH_INT8_QUICK = (
    "dynamic int8 Linear layers (torch.ao); a quick search measures it only where OpenVINO int8 "
    "fails: it ran 0.19-0.60x OpenVINO int8 on the three FP8 rows measured here"
)
OTHER_INT8_METHOD = {"static-qdq": "dynamic", "dynamic": "static-qdq"}


@dataclass(frozen=True)
class RowCandidate:
    """One configuration: what runs where (`placement`: backend, precision, device, threads and the
    backend's options), with why. Its JSON is flat (`to_dict`): the placement's five fields
    first."""

    placement: Placement
    _: KW_ONLY
    native: bool = True  # False: the device only emulates this precision (conversions around fp32)
    depth: str = "quick"
    why: str = ""
    fallback_for: str = ""  # a quick search measures it only where this label's candidate fails
    # why a 'full' candidate waits for a full search, where it is not the usual cost
    full_only_why: str = ""

    @classmethod
    def of(
        cls,
        backend: str,
        precision: str,
        device: str = "cpu",
        *,
        options: dict | None = None,
        threads: int | None = None,
        **about: Any,
    ) -> RowCandidate:
        """The candidate from the plain fields (options as a dict), `about` its other fields."""
        return cls(Placement.of(backend, precision, device, options, threads), **about)

    @property
    def label(self) -> str:
        return self.placement.label

    def plan(self) -> dict:
        """The model_benchmark parameters that run this configuration."""
        return self.placement.plan()

    def to_dict(self) -> dict:
        return {**flat_dict(self), "label": self.label}


def row_candidates(
    framework: Framework | str,
    hardware: str = "cpu",
    *,
    flags: Iterable[str] | None = None,
    providers: Iterable[str] = (),
    cores: int | None = None,
    int8_method: str | None = None,
) -> list[RowCandidate]:
    """Every configuration worth measuring for a model of `framework` ('torch', 'tensorflow',
    'onnx') on `hardware` ('cpu' or 'cuda'). `int8_method`, the ONNX Runtime int8 method the graph
    suggests ('static-qdq' or 'dynamic'), adds the other method as a full-search candidate, and for
    a transformer ('dynamic') NNCF's transformer preset beside its defaults."""
    if hardware not in ROW_CANDIDATES:
        raise InvalidParameter(
            "hardware",
            hardware,
            f"one of {', '.join(ROW_CANDIDATES)} (the IPU runs its published settings)",
        )
    return ROW_CANDIDATES[hardware](
        CandidateContext(
            Framework.parse(framework),
            frozenset(cpu_flags() if flags is None else flags),
            set(providers),
            cores or usable_cores(),
            int8_method,
        )
    )


@dataclass(frozen=True)
class CandidateContext:
    """What decides a row's candidates on a kind: the model's framework, the CPU flags, the ONNX
    Runtime providers that really start, the usable cores and the int8 method the graph suggests."""

    framework: Framework
    flags: frozenset[str]
    providers: set[str]
    cores: int
    int8_method: str | None = None


def _cpu_row(ctx: CandidateContext) -> list[RowCandidate]:
    out = _cpu(ctx.framework, ctx.flags, ctx.cores, transformer=ctx.int8_method == "dynamic")
    if ctx.int8_method in OTHER_INT8_METHOD:
        other = OTHER_INT8_METHOD[ctx.int8_method]
        default = next(
            c
            for c in out
            if c.placement.backend == "onnxruntime" and c.placement.precision == "int8"
        )
        out.insert(
            out.index(default) + 1,
            RowCandidate.of(
                "onnxruntime",
                "int8",
                options={"quantization": other},
                native=default.native,
                depth="full",
                why=f"{other} int8 instead of the graph's {ctx.int8_method}",
            ),
        )
    return out


def _cuda_row(ctx: CandidateContext) -> list[RowCandidate]:
    return _cuda(ctx.framework, ctx.providers)


def _cpu(
    framework: Framework, flags: frozenset[str], cores: int, transformer: bool = False
) -> list[RowCandidate]:
    vnni = not int8_saturates(flags)
    bf16, fp16 = bool(flags & set(BF16_FLAGS)), bool(flags & set(FP16_FLAGS))
    ort = "onnxruntime"
    out = [
        RowCandidate.of(ort, "fp32", why="the fp32 reference; all graph optimisations"),
        RowCandidate.of(
            ort,
            "fp32",
            options={"graph_optimization": "ORT_ENABLE_EXTENDED"},
            depth="full",
            why="without layout optimisations (NCHWc), which can cost on small shapes",
        ),
        RowCandidate.of(
            ort,
            "fp16",
            native=False,
            why="fp16 ONNX (ONNX Runtime's x86 CPU kernels convert around fp32)",
        ),
        RowCandidate.of(ort, "int8", native=vnni, why="VNNI int8" if vnni else "int8 without VNNI"),
    ]
    if cores > 1:
        out += [
            RowCandidate.of(
                ort,
                p,
                threads=cores - 1,
                native=p != "fp16" and (p != "int8" or vnni),
                depth="full",
                why=f"{cores - 1} intra-op threads: leaves a core to the host",
            )
            for p in ("fp32", "int8")
        ]
    ov = openvino_candidates(bf16, fp16, vnni, transformer)
    out += ov
    if not framework.torch_module:
        return out
    ov_int8 = next(c.label for c in ov if c.placement.precision == "int8")
    out += [
        RowCandidate.of(
            "torch", "fp32", depth="full", why="torch eager", full_only_why=TORCH_FP32_QUICK
        ),
        RowCandidate.of(
            "torch", "fp32", options={"compile": True}, depth="full", why="inductor, frozen weights"
        ),
        RowCandidate.of(
            "torch", "bf16", native=bf16, why="bf16 autocast" + ("" if bf16 else " (emulated)")
        ),
        RowCandidate.of(
            "torch",
            "bf16",
            options={"compile": True},
            native=bf16,
            depth="full",
            why="inductor bf16, frozen weights",
        ),
        RowCandidate.of(
            "torch", "fp16", native=fp16, why="fp16 autocast" + ("" if fp16 else " (emulated)")
        ),
        RowCandidate.of("torch", "int8", native=vnni, fallback_for=ov_int8, why=TORCH_INT8_QUICK),
    ]
    return out


def openvino_candidates(
    bf16: bool, fp16: bool, vnni: bool, transformer: bool = False
) -> list[RowCandidate]:
    """OpenVINO on the same ONNX export (every framework): f32, the 16-bit inference precisions this
    CPU has natively (OpenVINO would silently run f32 for the others), NNCF int8 with NNCF's
    defaults (and, for a transformer, its transformer preset: in a quick search only where the
    defaults fail); the LATENCY hint in every search, THROUGHPUT (several streams) in a full one."""
    ov = "openvino"
    out = [RowCandidate.of(ov, "fp32", why="OpenVINO f32, LATENCY hint, static shapes")]
    out += [
        RowCandidate.of(ov, p, why=f"OpenVINO {p} inference precision (native here)")
        for p, native in (("bf16", bf16), ("fp16", fp16))
        if native
    ]
    int8 = RowCandidate.of(
        ov,
        "int8",
        native=vnni,
        why="NNCF post-training int8 (NNCF's defaults) calibrated on the "
        "row's inputs" + ("" if vnni else " (no VNNI)"),
    )
    out.append(int8)
    if transformer:
        out.append(
            RowCandidate.of(
                ov,
                "int8",
                options={"nncf": "transformer"},
                native=vnni,
                fallback_for=int8.label,
                why="NNCF's transformer preset (SmoothQuant, attention kept in higher precision): "
                "closer to fp32, slower",
            )
        )
    best16 = "fp16" if fp16 else "bf16" if bf16 else None
    out += [
        RowCandidate.of(
            ov,
            p,
            options={"hint": "THROUGHPUT"},
            depth="full",
            why="THROUGHPUT hint: several streams over the cores",
        )
        for p in ("fp32", *([best16] if best16 else []))
    ]
    return out


#: the CUDA options a GPU search tries for a torch model: 16-bit weights (model.half();
#: channels_last for convolutional models, set by the backend), the whole host-to-host call in one
#: CUDA graph, two clients (each its own stream: one client's copies overlap the other's kernels),
#: and torch.compile; a GPU call is milliseconds, so compilation (about 20 s on an H200) fits a
#: quick search
TORCH_CUDA: tuple[tuple[str, dict[str, Any], str, str], ...] = (
    ("fp32", {}, "quick", "torch CUDA fp32 eager (TF32 tensor cores where cuDNN picks them)"),
    ("fp16", {}, "quick", "fp16 weights (model.half()), eager, pinned fp16 host buffers"),
    ("bf16", {}, "quick", "bf16 weights, eager, pinned bf16 host buffers"),
    (
        "fp16",
        {"cuda_graph": True},
        "quick",
        "fp16 weights, copies in, model and copies out in one CUDA graph",
    ),
    (
        "bf16",
        {"cuda_graph": True},
        "quick",
        "bf16 weights, copies in, model and copies out in one CUDA graph",
    ),
    (
        "fp16",
        {"cuda_graph": True, "clients": 2},
        "quick",
        "the CUDA graph call with 2 clients, each its own stream (copies overlap compute)",
    ),
    (
        "fp16",
        {"compile": True, "compile_mode": "reduce-overhead"},
        "quick",
        "inductor fp16, reduce-overhead (CUDA graphs), frozen weights; compile seconds recorded",
    ),
    (
        "fp16",
        {"compile": True, "compile_mode": "max-autotune"},
        "full",
        "inductor fp16, max-autotune (autotuned kernels, CUDA graphs): minutes of tuning",
    ),
)
#: ONNX Runtime's CUDA provider: IO binding per call, and the provider's CUDA graph option
ORT_CUDA: tuple[tuple[str, str, dict[str, Any], str, str], ...] = (
    ("fp32", "cuda", {}, "quick", "CUDA fp32, IO binding"),
    ("fp16", "cuda", {}, "quick", "CUDA fp16 (tensor cores), IO binding"),
    (
        "fp16",
        "cuda",
        {"cuda_graph": True},
        "quick",
        "CUDA fp16, the provider's CUDA graph (enable_cuda_graph)",
    ),
    (
        "fp16",
        "cuda",
        {"clients": 2},
        "full",
        "CUDA fp16, 2 clients (threads, each its own IO binding)",
    ),
)


def _cuda(framework: Framework, providers: set[str]) -> list[RowCandidate]:
    ort = "onnxruntime"
    out = [
        RowCandidate.of(
            ort,
            p,
            device,
            options=dict(o),
            depth=depth,
            why=why,
            fallback_for=ort_fallback_for(p, o),
        )
        for p, device, o, depth, why in ORT_CUDA
    ]
    if "TensorrtExecutionProvider" in providers:
        out += [
            RowCandidate.of(ort, "fp16", "tensorrt", why="TensorRT fp16, engine cache"),
            RowCandidate.of(
                ort, "int8", "tensorrt", why="TensorRT int8 (symmetric QDQ), engine cache"
            ),
        ]
    if tensorrt_python():
        out += [
            RowCandidate.of("tensorrt", p, "cuda", why=f"TensorRT's own API, {p} engine (cached)")
            for p in ("fp16", "int8")
        ]
    if framework.torch_module:
        out += [
            RowCandidate.of(
                "torch",
                p,
                "cuda",
                options=dict(o),
                depth=depth,
                why=why,
                fallback_for=eager_fallback_for(p, o),
            )
            for p, o, depth, why in TORCH_CUDA
        ]
    return out


def eager_fallback_for(precision: str, options: dict) -> str:
    """A torch candidate on a GPU other than the fp16 CUDA graph's kin (its clients and compiled
    variants) is measured in a quick search only where the fp16 CUDA-graph candidate fails: eager
    trails the graph (on an H200 eager fp16 resnet50 ran 946 and 6,850 img/s at batch 4 and 32
    against 4,210 and 12,700 in one CUDA graph), fp32 stands in where fp16 fails the numerics gate,
    and bf16 runs at fp16's tensor-core rate and width on the GPUs this kit targets (Ampere,
    Hopper), so it is worth a probe only where fp16 fails (overflow). A full search measures them
    all."""
    if precision == "fp16" and options:
        return ""
    if precision != "fp16" and options and options != {"cuda_graph": True}:
        return ""
    return RowCandidate.of("torch", "fp16", "cuda", options={"cuda_graph": True}).label


def ort_fallback_for(precision: str, options: dict) -> str:
    """ONNX Runtime's CUDA candidates without the provider's CUDA graph (fp16 with IO binding per
    call, and fp32) are measured in a quick search only where the fp16 CUDA-graph candidate fails:
    the graph replays the same kernels without their launches (a capture the provider refuses, a
    model with CPU nodes, falls back to them), and fp32 is the numerics gate's escape from fp16."""
    if options:
        return ""
    return RowCandidate.of("onnxruntime", "fp16", "cuda", options={"cuda_graph": True}).label


#: What a row's search measures, by hardware kind (kit.hardware.kinds); a kind absent here (the IPU)
#: runs its published settings.
ROW_CANDIDATES: dict[str, Callable[[CandidateContext], list[RowCandidate]]] = {
    kinds.CPU.name: _cpu_row,
    kinds.CUDA.name: _cuda_row,
}


def tensorrt_python() -> bool:
    """TensorRT's Python API is importable here (the -libs wheels ORT loads have no module)."""
    return importlib.util.find_spec("tensorrt") is not None


def native_16bit(candidates: Iterable[RowCandidate]) -> tuple[str, ...]:
    """The 16-bit precisions these candidates run natively (decides whether fp32 may stand in)."""
    return tuple(
        sorted(
            {
                c.placement.precision
                for c in candidates
                if c.placement.precision in ("bf16", "fp16") and c.native
            }
        )
    )
