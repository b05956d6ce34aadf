"""TensorRT through its own Python API (where `tensorrt` is installed), on a CUDA GPU.

The engine: `trt.Builder` → a network filled by `trt.OnnxParser` from the row's ONNX file → a
builder config (one optimization profile at the batch's shapes) → `build_serialized_network`, cached
on disk per TensorRT version, GPU, precision, shapes and ONNX file (engines are valid for exactly
those) → `Runtime.deserialize_cuda_engine` → an execution context per client, each with its own
buffers.

Where the precision comes from depends on TensorRT's typing (`typing_of`). TensorRT 10 is weakly
typed: the fp32 export with the FP16 flag (int8: the symmetric QDQ model with INT8 and FP16), and
TensorRT picks each layer's precision. TensorRT 11 removed those flags: every network is strongly
typed and runs at the types its graph states, so fp16 builds from the fp16 ONNX file (fp32 inputs
and outputs, kit.backends.onnx_conversion) and int8 from the symmetric QDQ model (its quantized
layers int8, the others fp32 with TF32 math), with no precision flag.

The timed call is host to host, as ByteMLPerf and PopRT time: pinned host inputs copied in
(non-blocking, on the client's stream), `set_tensor_address` bound once and `execute_async_v3` on
that stream, outputs copied back into pinned host buffers, the stream synchronised. Device buffers,
pinned buffers and streams are torch's (torch is the kit's CUDA runtime; no pycuda).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit import atomic
from kit.backends.base import (
    HOST_TO_HOST,
    BackendConfig,
    InProcessBackend,
    InProcessSession,
)
from kit.backends.onnx_conversion import convert_for_ort
from kit.backends.options import TensorRtOptions
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware.cuda import CudaDevice, cuda_device
from kit.hardware.environment import TENSORRT_DISTRIBUTIONS, distribution_version
from kit.models.spec import ExportedModel
from kit.paths import cache_dir

# the builder's scratch memory limit (TensorRT's tactics that need more are skipped)
WORKSPACE_BYTES = 4 << 30
WEAK, STRONG = "weak", "strong"
#: Weak typing's precision flags; int8: fp16 where a layer is not quantized.
FLAGS = {"fp32": (), "fp16": ("FP16",), "int8": ("INT8", "FP16")}
#: The arithmetic each precision runs (TensorRT allows TF32 for fp32 layers by default).
MATH = {
    WEAK: {"fp32": "tf32", "fp16": "fp16", "int8": "int8"},
    STRONG: {"fp32": "tf32", "fp16": "fp16", "int8": "int8 (quantized layers; tf32 elsewhere)"},
}


def typing_of(trt) -> str:
    """'weak' where this TensorRT still has the precision flags (10.x), 'strong' where every network
    is strongly typed and the flags are gone (11.x: BuilderFlag has no FP16)."""
    return WEAK if hasattr(trt.BuilderFlag, "FP16") else STRONG


def graph_for(model: ExportedModel, precision: str, typing: str) -> Path:
    """The ONNX file TensorRT builds from: the export itself (weak typing: the flags pick the
    precision), or the graph converted to the precision (strong typing); int8 always the
    symmetric QDQ model (explicit quantization)."""
    if precision == "int8":
        return convert_for_ort(model, "int8", symmetric=True)
    if precision == "fp16" and typing == STRONG:
        return convert_for_ort(model, "fp16")
    return Path(model.onnx_path)


class TrtCall:
    """One client: its execution context, device and pinned buffers, stream; a host-to-host call."""

    def __init__(self, engine, inputs: dict[str, np.ndarray], device: str):
        import torch

        self.context = engine.create_execution_context()
        self.stream = torch.cuda.Stream(device)
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.host_in = [
            torch.from_numpy(np.ascontiguousarray(v)).pin_memory() for v in inputs.values()
        ]
        self.dev_in = [torch.empty_like(h, device=device) for h in self.host_in]
        for name, buffer in zip(inputs, self.dev_in, strict=True):
            self.context.set_input_shape(name, tuple(buffer.shape))
            self.context.set_tensor_address(name, buffer.data_ptr())
        outputs = [n for n in names if n not in inputs]
        self.dev_out = [
            torch.empty(
                tuple(self.context.get_tensor_shape(n)),
                device=device,
                dtype=torch_dtype(engine.get_tensor_dtype(n)),
            )
            for n in outputs
        ]
        self.host_out = [torch.empty(d.shape, dtype=d.dtype).pin_memory() for d in self.dev_out]
        for name, buffer in zip(outputs, self.dev_out, strict=True):
            self.context.set_tensor_address(name, buffer.data_ptr())

    def load(self, inputs: dict[str, np.ndarray]) -> None:
        import torch

        for pinned, value in zip(self.host_in, inputs.values(), strict=True):
            pinned.copy_(torch.from_numpy(np.ascontiguousarray(value)))

    def __call__(self) -> list:
        import torch

        with torch.cuda.stream(self.stream):
            for device, host in zip(self.dev_in, self.host_in, strict=True):
                device.copy_(host, non_blocking=True)
            if not self.context.execute_async_v3(self.stream.cuda_stream):
                raise BackendUnavailable(
                    "TensorRT execute_async_v3 failed (see TensorRT's log above)"
                )
            for host, device in zip(self.host_out, self.dev_out, strict=True):
                host.copy_(device, non_blocking=True)
        self.stream.synchronize()
        return self.host_out


class TrtSession(InProcessSession):
    on_gpu = True
    clients_how = "threads, each its own execution context and CUDA stream"

    def __init__(self, engine, device: str, description: dict):
        self.engine, self.device, self.description = engine, device, description
        self.calls: dict[tuple, TrtCall] = {}  # run()'s context per input shapes

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        shapes = tuple(v.shape for v in inputs.values())
        if shapes not in self.calls:
            self.calls[shapes] = TrtCall(self.engine, inputs, self.device)
        self.calls[shapes].load(inputs)
        return [
            t.float().numpy() if t.is_floating_point() else t.numpy() for t in self.calls[shapes]()
        ]

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        return TrtCall(self.engine, inputs, self.device)


class TensorRtBackend(InProcessBackend):
    name = "tensorrt"
    options_type = TensorRtOptions
    precisions = ("fp32", "fp16", "int8")

    module = "tensorrt"
    label = "TensorRT"

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> TrtSession:
        import tensorrt as trt

        self.check_precision(config.precision)
        if config.device != "cuda":
            raise InvalidParameter("device", config.device, "cuda (TensorRT runs on an NVIDIA GPU)")
        device, gpu = gpu_device(config)
        inputs = model.make_inputs(batch_size)
        typing = typing_of(trt)
        onnx = graph_for(model, config.precision, typing)
        logger = trt.Logger(trt.Logger.WARNING)
        path = engine_path(onnx, config.precision, inputs, gpu.name, trt.__version__)
        started, cached = time.perf_counter(), path.exists()
        serialized = (
            path.read_bytes()
            if cached
            else build_engine(trt, logger, onnx, config.precision, inputs)
        )
        if not cached:
            atomic.write_bytes(path, bytes(serialized))
        engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
        if engine is None:
            raise BackendUnavailable(
                f"TensorRT could not deserialize the engine {path.name} (a stale cache? "
                "delete it to rebuild)"
            )
        description = {
            "backend": self.name,
            "device": config.device,
            "precision": config.precision,
            "tensorrt_version": trt.__version__,
            "typing": typing,
            "builder_flags": list(FLAGS[config.precision]) if typing == WEAK else [],
            "math": MATH[typing][config.precision],
            "model_file": Path(onnx).name,
            "engine_cache": str(path),
            "engine_reused": cached,
            "cuda_device": gpu.to_dict(),
            "timing": HOST_TO_HOST,
            "api": "TensorRT Python API "
            "(Builder, OnnxParser, build_serialized_network, execute_async_v3)",
        }
        session = TrtSession(engine, device, description)
        session.clients = config.options_as(TensorRtOptions).clients
        session.run(inputs)  # warm-up: the first context and its buffers, before any window
        # the engine's build (or its read from the cache) and the warm-up, as a torch.compile's
        description["compile_s"] = round(time.perf_counter() - started, 2)
        return session


def gpu_device(config: BackendConfig) -> tuple[str, CudaDevice]:
    gpu = cuda_device(config.options_as(TensorRtOptions).ordinal)
    return f"cuda:{gpu.index}", gpu


def build_engine(trt, logger, onnx: Path, precision: str, inputs: dict[str, np.ndarray]):
    """The serialized engine for these input shapes, or BackendUnavailable saying why not."""
    builder = trt.Builder(logger)
    # explicit batch (TensorRT 10's only mode); 11: strongly typed
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendUnavailable(f"TensorRT's ONNX parser refused {Path(onnx).name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if typing_of(trt) == WEAK:  # strong typing: the graph's own types (graph_for)
        for flag in FLAGS[precision]:
            config.set_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, value in inputs.items():  # one profile, exactly the batch's shapes
        profile.set_shape(name, value.shape, value.shape, value.shape)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BackendUnavailable(
            f"TensorRT could not build an engine for {Path(onnx).name} at {precision} "
            "(see TensorRT's log above)"
        )
    return serialized


def engine_path(
    onnx: Path, precision: str, inputs: dict[str, np.ndarray], gpu_name: str, version: str
) -> Path:
    """Where the engine is cached: one per TensorRT version, GPU, precision, input shapes and ONNX
    file."""
    st = Path(onnx).stat()
    key = json.dumps(
        {
            "trt": version,
            "installed": distribution_version(*TENSORRT_DISTRIBUTIONS),
            "gpu": gpu_name,
            "precision": precision,
            "shapes": {k: list(v.shape) for k, v in inputs.items()},
            "onnx": [str(Path(onnx).resolve()), st.st_size, st.st_mtime_ns],
        },
        sort_keys=True,
    )
    return (
        cache_dir()
        / "tensorrt"
        / "engines"
        / f"{Path(onnx).stem}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.engine"
    )


def torch_dtype(trt_dtype):
    """The torch dtype of a TensorRT tensor type (by name: FLOAT, HALF, INT8, INT32, INT64,
    BOOL)."""
    import torch

    names = {
        "FLOAT": torch.float32,
        "HALF": torch.float16,
        "BF16": torch.bfloat16,
        "INT8": torch.int8,
        "INT32": torch.int32,
        "INT64": torch.int64,
        "BOOL": torch.bool,
    }
    name = getattr(trt_dtype, "name", str(trt_dtype)).rsplit(".", 1)[-1]
    if name not in names:
        raise BackendUnavailable(f"TensorRT output type {name} has no torch buffer here")
    return names[name]
