"""PyTorch: the zoo's own framework model, eager under inference_mode, optionally torch.compile.

Precisions: fp32; bf16 and fp16 through autocast on the CPU (on a CPU without avx512_fp16/AMX-FP16,
fp16 is emulated by conversions and runs slower than fp32: allowed, and the description says so)
and through 16-bit weights on a GPU (`model.half()`, as ByteMLPerf: autocast would re-cast the
weights every call); int8 through torch.ao dynamic quantization of the Linear layers (CPU only;
convolutions stay fp32). CNNs run channels_last. Its options (`TorchOptions`): compile=True
(inductor with freezing; falls back to eager with a recorded note if compilation fails),
compile_mode (torch.compile mode), cuda_graph, clients, device_id (the CUDA ordinal, after
CUDA_VISIBLE_DEVICES).

On a GPU the timed call is host to host: inputs copied in, run, outputs copied back, as ByteMLPerf
and PopRT time; `measure_device_resident` gives the figure without the copies, labelled.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.backends.base import (
    HOST_TO_HOST,
    BackendConfig,
    InProcessBackend,
    InProcessSession,
)
from kit.backends.compile_cache import compile_caches, fx_graph_cache_counts
from kit.backends.onnx_conversion import is_convolutional
from kit.backends.options import TorchOptions
from kit.backends.torch_cuda import (
    GraphCall,
    StreamCall,
    capture,
    culprit,
    host_tensors,
    pinned_host_inputs,
    warm_up,
)
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware.cuda import CudaDevice, cuda_device
from kit.hardware.environment import cpu_flags, cpu_model, usable_cores
from kit.models import MODELS
from kit.models.spec import ExportedModel

DEVICES = ("cpu", "cuda")
AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}
#: torch.compile modes whose compiled module replays inductor's CUDA graphs on a GPU
CUDA_GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")


class TorchSession(InProcessSession):
    """One framework model on one device; `forward` is what both run() and the timed call do."""

    @property
    # Session.clients_how, a plain attribute elsewhere
    def clients_how(self) -> str:  # type: ignore[override]
        return "threads, each its own CUDA stream" if self.on_gpu else "threads sharing one session"

    def __init__(
        self,
        module,
        device: str,
        precision: str,
        channels_last: bool,
        description: dict,
        on_gpu: bool = False,
    ):
        self.module = module
        self.device = device  # 'cpu' or 'cuda:N'
        self.device_type = device.split(":")[0]
        self.on_gpu = on_gpu
        self.precision = precision
        self.channels_last = channels_last
        self.description = description
        self.cast_floats = None  # a torch dtype when weights themselves are 16-bit (no autocast)
        # CPU autocast can overflow on some models; the first run finds out (check_autocast)
        self.autocast_checked = precision not in AUTOCAST
        self.cuda_graph = False  # GPU: the host-to-host call captured in one CUDA graph
        # GPU: one call per (input shapes, client, captured?), kept for the session's life: every
        # timed window and run() replay the graph captured before them, into the same pinned buffers
        self.calls: dict[tuple, GraphCall | StreamCall] = {}

    def to_tensors(self, inputs: dict[str, np.ndarray]) -> list:
        import torch

        tensors = [
            torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for v in inputs.values()
        ]
        if self.cast_floats is not None:
            tensors = [t.to(self.cast_floats) if t.is_floating_point() else t for t in tensors]
        return tensors

    def use_16bit_weights(self, why: str = "autocast overflowed for this model") -> None:
        """Cast the weights instead of autocasting: some models (DeBERTa) fill masks with the fp32
        minimum, which overflows a 16-bit tensor under autocast but not in a 16-bit model; on a
        GPU, 16-bit weights are the method (autocast re-casts them every call)."""
        import torch

        dtype = getattr(torch, AUTOCAST[self.precision])
        self.module = self.module.to(dtype)
        self.cast_floats = dtype
        self.autocast_checked = True
        self.precision_mode = "weights"
        self.description["autocast"] = None
        self.description["weights_dtype"] = str(dtype).removeprefix("torch.")
        self.description["notes"].append(f"{why}: weights cast to {dtype}")

    def forward(self, tensors: list):
        import torch

        if self.channels_last:
            tensors = [
                t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t
                for t in tensors
            ]
        autocast = (
            torch.autocast(self.device_type, dtype=getattr(torch, AUTOCAST[self.precision]))
            if self.precision in AUTOCAST and self.cast_floats is None
            else contextlib.nullcontext()
        )
        with torch.inference_mode(), autocast:
            return self.module(*tensors)

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not self.autocast_checked:
            return self.check_autocast(inputs)
        if self.on_gpu and self.cuda_graph:
            # the numerics see what the timed call runs (a copy: the
            # buffers are the next call's)
            return [to_numpy(t).copy() for t in self.client_call(inputs, 0)()]
        return [to_numpy(t) for t in flatten_outputs(self.forward(self.to_tensors(inputs)))]

    def device_outputs(self, tensors: list) -> list:
        import torch

        return [t for t in flatten_outputs(self.forward(tensors)) if isinstance(t, torch.Tensor)]

    def client_call(self, inputs: dict[str, np.ndarray], client: int) -> GraphCall | StreamCall:
        """Client `client`'s host-to-host call for these input shapes, made (and, with cuda_graph,
        captured) the first time, then kept: later ones copy `inputs` into its pinned buffers."""
        key = (tuple(np.shape(v) for v in inputs.values()), client, self.cuda_graph)
        call = self.calls.get(key)
        if call is None:
            host = pinned_host_inputs(list(inputs.values()), self.cast_floats)
            call = self.calls[key] = (GraphCall if self.cuda_graph else StreamCall)(
                self.device_outputs, host, self.device
            )
        else:
            call.load(host_tensors(list(inputs.values()), self.cast_floats))
        return call

    def check_autocast(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The first autocast forward; on a 16-bit overflow error, switch to 16-bit weights and run
        again. Done by the first run() (the numerics call), or by bind() before any timed call."""
        self.autocast_checked = True
        try:
            return self.run(inputs)
        except RuntimeError as exc:
            if "overflow" not in str(exc):
                raise
        self.use_16bit_weights()
        return self.run(inputs)

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """On the CPU: the forward. On a GPU: host to host on this client's own stream, captured in
        a CUDA graph with the cuda_graph option (kit.backends.torch_cuda). The session's own thread
        count first: torch's is per process, and a later load (a search's next candidate) sets its
        own."""
        import torch

        torch.set_num_threads(self.description["threads"])
        if not self.autocast_checked:
            self.check_autocast(inputs)
        if not self.on_gpu:
            tensors = self.to_tensors(inputs)
            forward = self.forward
            return lambda: forward(tensors)
        return self.client_call(inputs, 0)

    def bind_clients(
        self, inputs: dict[str, np.ndarray], clients: int
    ) -> list[Callable[[], object]]:
        """On a GPU each client's own kept call (its stream, buffers and graph); else as `bind`."""
        if not self.on_gpu:
            return super().bind_clients(inputs, clients)
        self.bind(inputs)  # the thread count and the autocast check, as bind does
        return [self.client_call(inputs, i) for i in range(clients)]

    def close(self) -> None:
        """Drop the kept calls: their graphs, streams and pinned buffers go with them."""
        self.calls.clear()

    def bind_device_resident(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """Inputs on the GPU once, outputs left there, as the session runs (with cuda_graph the
        model captured in a CUDA graph of its own, replayed), on this client's own stream; the
        call waits for that stream, not the whole device (other clients run on)."""
        import torch

        if not self.on_gpu:
            return self.bind(inputs)
        forward, host = (
            self.device_outputs,
            pinned_host_inputs(list(inputs.values()), self.cast_floats),
        )
        tensors = [torch.empty_like(h, device=self.device).copy_(h) for h in host]
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        run: Callable[[], object] = lambda: forward(tensors)  # noqa: E731
        if self.cuda_graph:
            warm_up(stream, self.device, run)
            graph = torch.cuda.CUDAGraph()
            capture(graph, stream, self.device, lambda: forward(tensors))
            run = graph.replay

        def call_resident() -> None:
            with torch.cuda.stream(stream):
                run()
            stream.synchronize()

        return call_resident


class TorchBackend(InProcessBackend):
    name = "torch"
    options_type = TorchOptions
    precisions = ("fp32", "bf16", "fp16", "int8")

    module = "torch"
    label = "PyTorch"

    def check_precision(self, precision: str) -> None:
        if precision == "fp8":
            raise InvalidParameter(
                "precision",
                precision,
                "the torch backend has no fp8 path; the FP8 rows "
                "map to int8 on CPU (see kit.search.precision_map)",
            )
        super().check_precision(precision)

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> TorchSession:
        import torch

        self.check_precision(config.precision)
        check_device(config.device, config.precision)
        options = check_gpu_options(config)
        device, gpu = torch_device(config)
        module = build_module(model)
        torch.set_num_threads(config.threads or usable_cores())
        cnn = is_convolutional(model.task)
        notes: list[str] = []
        if config.precision == "int8":
            module, quantized = quantize_linear(module)
            notes.append(
                f"dynamic int8 (torch.ao, deprecated upstream): {quantized} Linear layers "
                "quantized; other layers stay fp32"
            )
        if (
            config.precision == "fp16"
            and config.device == "cpu"
            and "avx512_fp16" not in cpu_flags()
        ):
            notes.append(
                "fp16 on a CPU without avx512_fp16: emulated by conversions, expect slower than "
                "fp32"
            )
        module = module.to(device)
        if cnn:
            module = module.to(memory_format=torch.channels_last)
        description = {
            "backend": self.name,
            "device": config.device,
            "precision": config.precision,
            "mode": "eager",
            "inference_mode": True,
            "channels_last": cnn,
            "autocast": AUTOCAST.get(config.precision),
            "threads": torch.get_num_threads(),
            "torch_version": torch.__version__,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
            "model_source": f"kit.models zoo entry {model.name}",
            "notes": notes,
        }
        if gpu is not None:
            # a session serves one batch size: cuDNN may time its algorithms once for the shapes
            # (in the warm-up below, before any window or capture) and keep the fastest
            torch.backends.cudnn.benchmark = True
            description.update(
                cuda_device=gpu.to_dict(),
                torch_cuda=torch.version.cuda,
                timing=HOST_TO_HOST,
                math=gpu_math(config.precision, cnn),
                cudnn_benchmark=True,
            )
        session = TorchSession(
            module, device, config.precision, cnn, description, on_gpu=gpu is not None
        )
        session.clients = options.clients
        if gpu is not None:
            if config.precision in AUTOCAST:
                session.use_16bit_weights(
                    "16-bit on a GPU as ByteMLPerf runs it (model.half(), not autocast)"
                )
            # warm-up: cuDNN and the allocator, before any window
            session.run(model.make_inputs(batch_size))
        if options.compile:
            if not session.autocast_checked:
                # eager, so compiled and eager runs pick the same 16-bit path
                session.check_autocast(model.make_inputs(batch_size))
            compile_session(session, model.make_inputs(batch_size), options.compile_mode)
        if options.cuda_graph:
            capture_graph(session, model.make_inputs(batch_size))
        return session


def check_device(device: str, precision: str) -> None:
    import torch

    if device not in DEVICES:
        raise InvalidParameter("device", device, f"the torch backend runs on {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable(
            f"CUDA backend unavailable: torch {torch.__version__} here sees no CUDA "
            "device (needs a CUDA build of torch and an NVIDIA GPU)"
        )
    if device == "cuda" and precision == "int8":
        raise InvalidParameter(
            "precision",
            precision,
            "torch int8 (dynamic quantization) is CPU-only; "
            "use onnxruntime with the tensorrt device for int8 on a GPU",
        )


def capture_graph(session: TorchSession, inputs: dict[str, np.ndarray]) -> None:
    """Capture the host-to-host call now, not in a timed window; a model a capture refuses (it
    synchronises inside its forward, e.g. `.item()` on a tensor) is BackendUnavailable, saying
    why."""
    session.cuda_graph = True
    try:
        session.run(inputs)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BackendUnavailable(
            f"CUDA graph capture failed ({first}) at {culprit(exc)}: the model does something "
            "a capture refuses (a synchronising op, host memory); run it without cuda_graph"
        ) from exc
    session.description["mode"] += (
        "; host-to-host call captured in one CUDA graph (pinned buffers, replayed per call)"
    )


def gpu_math(precision: str, cnn: bool) -> str:
    """The arithmetic a CUDA run does (the roofline's peak): 16-bit weights on tensor cores; fp32 on
    TF32 tensor cores where torch allows it (cuDNN convolutions by default, matmuls only if
    enabled)."""
    import torch

    if precision != "fp32":
        return precision
    allowed = torch.backends.cudnn.allow_tf32 if cnn else torch.backends.cuda.matmul.allow_tf32
    return "tf32" if allowed else "fp32"


def check_gpu_options(config: BackendConfig) -> TorchOptions:
    """The config's options as torch's record (checked there: not cuda_graph with compile),
    cuda_graph only on a GPU, and one client where torch.compile's mode captures CUDA graphs."""
    options = config.options_as(TorchOptions)
    if options.cuda_graph and config.device != "cuda":
        raise InvalidParameter(
            "cuda_graph", True, "only on device cuda (a CUDA graph captures GPU work)"
        )
    if (
        config.device == "cuda"
        and options.compile
        and options.compile_mode in CUDA_GRAPH_COMPILE_MODES
        and (options.clients or 1) > 1
    ):
        # inductor's CUDA graph trees are one per compiled module and process, not per thread: a
        # call overwrites the outputs of the call before it, another client's still being copied
        raise InvalidParameter(
            "clients",
            options.clients,
            f"1 with compile_mode={options.compile_mode} on a GPU (its CUDA graphs are shared "
            "by every thread and each call overwrites the last call's outputs); for several "
            "clients use cuda_graph (one graph per client) or another compile mode",
        )
    return options


def torch_device(config: BackendConfig) -> tuple[str, CudaDevice | None]:
    """'cpu', or 'cuda:N' with its CudaDevice for the ordinal in the option device_id (default
    0)."""
    if config.device == "cpu":
        return "cpu", None

    gpu = cuda_device(config.options_as(TorchOptions).ordinal)
    return f"cuda:{gpu.index}", gpu


def build_module(model: ExportedModel):
    """The zoo's framework model with the export's weights and seed, in eval mode: a copy of the one
    this process built last (a search loads the same model for every candidate: building Swin-L or
    BERT, random initialisation or weights read from disk, takes 1-2 s on a 2-core EPYC, copying it
    0.1-0.4 s)."""
    if model.framework == "onnx" or model.name not in MODELS:
        raise InvalidParameter(
            "model",
            model.name,
            "the torch backend needs a zoo model built in PyTorch; "
            "run ONNX files with backend onnxruntime",
        )
    entry = MODELS.get(model.name)
    if not entry.framework.torch_module:
        raise InvalidParameter(
            "backend",
            "torch",
            f"{model.name} is a {entry.framework} model, not PyTorch; "
            "use backend onnxruntime for it",
        )
    weights_dir = str(model.weights.directory or "")
    return copy.deepcopy(built_module(model.name, model.small, weights_dir, weights_seed(model)))


@functools.lru_cache(maxsize=1)  # one model per process at a time: a job benchmarks one
def built_module(name: str, small: bool, weights_dir: str, seed: int):
    """The zoo entry `name` built once (fp32, on the CPU, eval mode); callers take copies."""
    return (
        MODELS.get(name)
        .build(small=small, weights_dir=Path(weights_dir) if weights_dir else None, seed=seed)
        .eval()
    )


def weights_seed(model: ExportedModel) -> int:
    """The seed a random-weights export was built with ('seed 3' -> 3)."""
    detail = model.weights.detail
    return (
        int(detail.split()[-1]) if model.weights.is_random and detail.split()[-1].isdigit() else 0
    )


def quantize_linear(module) -> tuple[object, int]:
    """torch.ao dynamic int8 quantization of every nn.Linear; returns the module and the count."""
    import torch
    from torch.ao.quantization import quantize_dynamic

    count = sum(isinstance(m, torch.nn.Linear) for m in module.modules())
    if count == 0:
        raise InvalidParameter(
            "precision",
            "int8",
            "torch dynamic int8 quantizes Linear layers and this "
            "model has none; use onnxruntime int8 (static QDQ) instead",
        )
    with warnings.catch_warnings():  # torch.ao's quantized-tensor deprecation notice, once per load
        warnings.filterwarnings(
            "ignore", message=".*quantize_per_tensor.*deprecated", category=UserWarning
        )
        return quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.qint8), count


def compile_session(session: TorchSession, inputs: dict[str, np.ndarray], mode: str | None) -> None:
    """torch.compile the module (inductor, weights frozen) for these static shapes (`dynamic=False`:
    a session serves one batch size, and dynamo would otherwise compile the second batch a process
    sees with a symbolic batch dimension) and compile now, not in the timed loop, its kernels
    cached under the kit's cache (kit.backends.compile_cache; `compile_cache` says whether its
    graphs came from there), and on a GPU record its CUDA graphs now too, all in `compile_s`; on
    failure keep eager and record why."""
    import torch

    eager = session.module
    gpu = session.description.get("cuda_device") or {}
    session.description["compile_caches"] = compile_caches(
        torch.__version__, gpu.get("name") or cpu_model()
    )
    started, before = time.perf_counter(), fx_graph_cache_counts()
    try:
        session.module = torch.compile(eager, mode=mode, dynamic=False)
        # past dynamo's recompile limit a compiled module runs eager without a word: say so instead
        with (
            torch._inductor.config.patch(freezing=True),
            torch._dynamo.config.patch(fail_on_recompile_limit_hit=True),
        ):
            # with CUDA graphs inductor warms up on the first call and records on the second
            for _ in range(2 if session.on_gpu and mode in CUDA_GRAPH_COMPILE_MODES else 1):
                session.run(inputs)
    except Exception as exc:  # noqa: BLE001 - dynamo/inductor raise many types
        session.module = eager
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        # the fact, read by the search and the results
        session.description["compile_fallback"] = first
        session.description["notes"].append(f"torch.compile failed ({first}); fell back to eager")
        return
    session.description["mode"] = f"torch.compile (inductor, freezing, mode={mode or 'default'})"
    session.description["compile_s"] = round(time.perf_counter() - started, 2)
    session.description["compile_cache"] = {
        k: n - before[k] for k, n in fx_graph_cache_counts().items()
    }


def flatten_outputs(out) -> list:
    """Outputs in ONNX export order: a tensor, a tuple/list, or a dict/ModelOutput's values."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # transformers' ModelOutput is an OrderedDict
        return list(out.values())
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def to_numpy(t) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.is_floating_point() else t).numpy()
