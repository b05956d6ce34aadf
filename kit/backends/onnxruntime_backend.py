"""ONNX Runtime: CPU execution provider here; CUDA and TensorRT providers where installed.

On a GPU the session must really run on the provider asked for: ORT falls back to the next
provider in the list (TensorRT -> CUDA -> CPU) with only a warning when one fails to load, so
`load` checks `session.get_providers()[0]` and raises BackendUnavailable otherwise. ORT's Python
session also retries a failed `run()` on the fallback providers (EPFail): the kit creates GPU
sessions with that fallback disabled (`enable_fallback=0`, then `disable_fallback()`), re-reads the
providers after the warm-up and after every timed window, and a provider lost mid-run is an error.
The share of nodes placed on the CPU is read from ORT's own profile of one warm-up run (each
executed kernel names its provider); the warm-up also builds TensorRT engines and runs cuDNN's
algorithm search before any timed or power window.

Timing is host to host (inputs copied in, run, outputs copied out), as ByteMLPerf's GPU backend
and PopRT on the IPU time; `measure_device_resident` gives the figure with inputs and outputs left
on the GPU, labelled as such. On a GPU each client's call runs through its own IO binding (host
arrays bound as CPU inputs, outputs bound to the CPU: ORT copies them in and out inside
`run_with_iobinding`). The `cuda_graph` option (device cuda) turns on the CUDA provider's own CUDA
graph (`enable_cuda_graph`): inputs and outputs are then bound to CUDA OrtValues at fixed addresses
and a call copies the host inputs into them (`update_inplace`), runs and copies the outputs back.
`clients` (a searched option on a GPU): concurrent clients, threads each with its own binding.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kit.backends.base import (
    HOST_TO_HOST,
    BackendConfig,
    InProcessBackend,
    InProcessSession,
)
from kit.backends.onnx_conversion import conversion_label, convert_for_ort
from kit.backends.options import OnnxRuntimeOptions
from kit.errors import BackendUnavailable, CorruptModel, InvalidParameter, KitError
from kit.hardware.cuda import cuda_device
from kit.hardware.environment import (
    TENSORRT_DISTRIBUTIONS,
    distribution_version,
    onnxruntime_version,
    usable_cores,
)
from kit.hardware.onnxruntime_probe import preload_gpu_libraries
from kit.measure.window import BatchMeasurement, MeasureConfig
from kit.models.spec import ExportedModel
from kit.paths import cache_dir

PROVIDERS = {
    "cpu": ["CPUExecutionProvider"],
    "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
    "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
}
UNSUPPORTED = {  # precision -> why ORT cannot run it, and what to use instead
    "bf16": "ONNX Runtime has no bf16 conversion path for CPU kernels; use backend 'torch' for "
    "bf16",
    "fp8": "ONNX Runtime CPU has no fp8 kernels; the FP8 rows map to int8 on CPU (see "
    "kit.search.precision_map)",
}
CUDA_INT8 = (
    "the plain CUDA provider has no int8 kernels for a QDQ model: it would run fp32 kernels "
    "and report them as int8; use device 'tensorrt' (TensorRT int8 from a symmetric QDQ model)"
)
ONE_GRAPH = "1 with cuda_graph (ORT captures one graph per session, bound to one set of buffers)"


class OrtGraphCall:
    """The session's one CUDA-graph binding: CUDA OrtValues at fixed addresses for inputs and
    outputs (ORT replays its captured graph on exactly those); a call copies the host inputs in,
    runs and copies the outputs out."""

    def __init__(
        self, session, inputs: dict[str, np.ndarray], output_names: list[str], device_id: int
    ):
        import onnxruntime as ort

        self.session, self.binding = session, session.io_binding()
        self.host = [np.ascontiguousarray(v) for v in inputs.values()]
        self.inputs = [ort.OrtValue.ortvalue_from_numpy(h, "cuda", device_id) for h in self.host]
        for name, value in zip(inputs, self.inputs, strict=True):
            self.binding.bind_ortvalue_input(name, value)
        for name in output_names:  # ORT allocates them in a first run (before its capture) ...
            self.binding.bind_output(name, "cuda", device_id)
        session.run_with_iobinding(self.binding)
        self.outputs = self.binding.get_outputs()
        for name, value in zip(output_names, self.outputs, strict=True):
            # ... then they stay where they are
            self.binding.bind_ortvalue_output(name, value)

    def load(self, inputs: dict[str, np.ndarray]) -> None:
        self.host = [np.ascontiguousarray(v) for v in inputs.values()]

    def __call__(self) -> list[np.ndarray]:
        for value, host in zip(self.inputs, self.host, strict=True):
            value.update_inplace(host)
        self.session.run_with_iobinding(self.binding)
        return [o.numpy() for o in self.outputs]


class OrtSession(InProcessSession):
    clients_how = "threads, each its own IO binding"

    @property
    # Session.on_gpu, a plain attribute elsewhere
    def on_gpu(self) -> bool:  # type: ignore[override]
        return self.device != "cpu"

    def __init__(
        self,
        session,
        description: dict,
        device: str = "cpu",
        device_id: int = 0,
        cuda_graph: bool = False,
    ):
        self.session = session
        self.description = description
        self.device = device
        self.device_id = device_id
        self.output_names = [o.name for o in session.get_outputs()]
        self.cuda_graph = cuda_graph
        # one per session: ORT captures one graph per session
        self.graph: OrtGraphCall | None = None

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self.cuda_graph:
            return self.graph_call(inputs)()
        return self.session.run(self.output_names, inputs)

    def with_clients(self, cfg: MeasureConfig) -> MeasureConfig:
        cfg = super().with_clients(cfg)
        if self.cuda_graph and cfg.clients > 1:  # threads would run one binding at once
            raise InvalidParameter("clients", cfg.clients, ONE_GRAPH)
        return cfg

    def graph_call(self, inputs: dict[str, np.ndarray]) -> OrtGraphCall:
        if self.graph is None:
            self.graph = OrtGraphCall(self.session, inputs, self.output_names, self.device_id)
        self.graph.load(inputs)
        return self.graph

    def measure(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        return self.checked(super().measure, inputs, batch_size, cfg)

    def measure_window(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig, sampler=None
    ) -> BatchMeasurement:
        return self.checked(super().measure_window, inputs, batch_size, cfg, sampler)

    def measure_device_resident(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        return self.checked(super().measure_device_resident, inputs, batch_size, cfg)

    def checked(self, timed: Callable[..., BatchMeasurement], *args) -> BatchMeasurement:
        """`timed(*args)`, refused when a GPU provider failed or was replaced during it."""
        if not self.on_gpu:
            return timed(*args)
        from onnxruntime.capi.onnxruntime_pybind11_state import EPFail

        try:
            m = timed(*args)
        except EPFail as exc:
            raise BackendUnavailable(
                f"{self.device.upper()} provider failed mid-run (ORT's fallback is "
                f"disabled: nothing was timed on another provider): {exc}"
            ) from exc
        check_same_providers(
            self.device,
            self.description["providers"],
            self.session.get_providers(),
            "during the timed calls",
        )
        return m

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """A host-to-host call. Each call of `bind` makes its own IO binding (bindings are not
        safe to share between threads): host arrays bound as CPU inputs, outputs bound to the
        CPU, so on a GPU ORT copies them in and out within `run_with_iobinding`."""
        if self.cuda_graph:
            return self.graph_call(inputs)
        binding = self.session.io_binding()
        for name, value in inputs.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name in self.output_names:
            binding.bind_output(name)
        run_bound = self.session.run_with_iobinding
        return lambda: run_bound(binding)  # outputs bound to the CPU: copied out within the run

    def bind_device_resident(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """Inputs staged on this session's GPU once, outputs bound there: no copies in the call."""
        import onnxruntime as ort

        if self.device == "cpu":
            return self.bind(inputs)
        binding = self.session.io_binding()
        for name, value in inputs.items():
            staged = ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(value), "cuda", self.device_id
            )
            binding.bind_ortvalue_input(name, staged)
        for name in self.output_names:
            binding.bind_output(name, "cuda", self.device_id)
        run_bound = self.session.run_with_iobinding

        # run_with_iobinding synchronises the provider's stream before returning
        def call() -> None:
            run_bound(binding)

        return call


class OnnxRuntimeBackend(InProcessBackend):
    name = "onnxruntime"
    precisions = ("fp32", "fp16", "int8")
    options_type = OnnxRuntimeOptions

    module = "onnxruntime"
    label = "ONNX Runtime"

    def check_precision(self, precision: str) -> None:
        if precision in UNSUPPORTED:
            raise InvalidParameter("precision", precision, UNSUPPORTED[precision])
        super().check_precision(precision)

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> OrtSession:
        import onnxruntime as ort

        self.check_precision(config.precision)
        if config.device == "cuda" and config.precision == "int8":
            raise InvalidParameter("precision", "int8", CUDA_INT8)
        check_cuda_graph(config)
        providers = self.providers(config, ort.get_available_providers(), batch_size)
        gpu = None
        if config.device != "cpu":
            gpu = cuda_device(device_id(config))
            preload_gpu_libraries(ort)
        path = self.prepare_model(model, config)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = getattr(
            ort.GraphOptimizationLevel, graph_optimization(config)
        )
        opts.intra_op_num_threads = config.threads or usable_cores()
        opts.inter_op_num_threads = 1
        profile_dir = None
        if gpu is not None:  # one profiled warm-up run says where each node ran
            profile_dir = tempfile.TemporaryDirectory(prefix="kit-ort-profile-")
            opts.enable_profiling = True
            opts.profile_file_prefix = str(Path(profile_dir.name) / "placement")
        engines = EngineBuilds(providers[0][1]) if config.device == "tensorrt" else None
        session = create_session(ort, path, opts, providers, config.device)
        check_first_provider(config.device, session.get_providers())
        description = self.describe(model, config, session, path, opts)
        loaded = OrtSession(
            session,
            description,
            config.device,
            gpu.index if gpu else 0,
            cuda_graph=bool(ort_options(config).cuda_graph),
        )
        loaded.clients = ort_options(config).clients
        if gpu is not None:
            description["cuda_device"] = gpu.to_dict()
            description["timing"] = HOST_TO_HOST
            if config.device == "tensorrt":
                description["tensorrt_version"] = tensorrt_version()
                description["trt_engine_cache_path"] = providers[0][1]["trt_engine_cache_path"]
            try:
                loaded.run(model.make_inputs(batch_size))  # engine build / cuDNN search happen here
                description["placement"] = placement_from_profile(Path(session.end_profiling()))
            except Exception as exc:  # noqa: BLE001
                # ORT raises its own types (out of memory, TensorRT build)
                raise BackendUnavailable(
                    f"{config.device} warm-up run of {path.name} at batch {batch_size} "
                    f"failed: {exc}"
                ) from exc
            finally:
                if profile_dir is not None:
                    profile_dir.cleanup()
            check_same_providers(
                config.device,
                description["providers"],
                session.get_providers(),
                "during the warm-up run",
            )
            description["cpu_node_share"] = description["placement"]["cpu_share"]
        if engines is not None:
            description.update(engines.account())
        return loaded

    def describe(
        self, model: ExportedModel, config: BackendConfig, session, path: Path, opts
    ) -> dict:
        import onnxruntime as ort

        description = {
            "backend": self.name,
            "device": config.device,
            "providers": session.get_providers(),
            "precision": config.precision,
            "threads": opts.intra_op_num_threads,
            "graph_optimization": graph_optimization(config),
            "io_binding": True,
            "cuda_graph": bool(ort_options(config).cuda_graph),
            "model_file": path.name,
            "ort_version": ort.__version__,
        }
        if config.device != "cpu":
            description["math"] = ort_gpu_math(config)
        if config.precision not in ("fp32", model.precision):
            description["conversion"] = conversion_label(
                model,
                config.precision,
                symmetric=config.device == "tensorrt",
                quantization=quantization(config),
            )
        return description

    def providers(
        self, config: BackendConfig, available: list[str], batch_size: int | None = None
    ) -> list:
        """Provider list for the device, with options (TensorRT's engines kept per `batch_size`);
        BackendUnavailable where it is absent."""
        device = config.device
        if device not in PROVIDERS:
            raise BackendUnavailable(
                f"onnxruntime has no device {device!r}; use one of {list(PROVIDERS)}"
            )
        wanted = PROVIDERS[device][0]
        if wanted not in available:
            raise BackendUnavailable(
                f"{device.upper()} backend unavailable: ONNX Runtime here has "
                f"{', '.join(available)} (needs {wanted}: install onnxruntime-gpu on a machine "
                "with an NVIDIA GPU)"
            )
        options = provider_options(config, batch_size)
        return [(p, options[p]) if p in options else p for p in PROVIDERS[device]]

    def prepare_model(self, model: ExportedModel, config: BackendConfig) -> Path:
        """The ONNX file to load at this precision (fp32, or the graph's own: the file itself). int8
        for TensorRT is static QDQ with signed symmetric activations and weights, whatever the
        model."""
        if config.precision in ("fp32", model.precision):
            # a file already at this precision runs as it is
            return model.onnx_path

        if config.device == "tensorrt" and config.precision == "int8":
            return convert_for_ort(model, "int8", symmetric=True)
        return convert_for_ort(model, config.precision, quantization=quantization(config))


def ort_gpu_math(config: BackendConfig) -> str:
    """The arithmetic a GPU session does (the roofline's peak): fp32 runs on TF32 tensor cores
    unless turned off (the CUDA provider's use_tf32 defaults to on; TensorRT allows TF32 by
    default)."""
    if config.precision != "fp32":
        return config.precision
    tf32 = provider_options(config)["CUDAExecutionProvider"].get("use_tf32", 1)
    return "fp32" if config.device == "cuda" and str(tf32) in ("0", "False", "false") else "tf32"


def check_cuda_graph(config: BackendConfig) -> None:
    """The cuda_graph option: the CUDA provider's, one captured graph per session (one client)."""
    options = ort_options(config)
    if not options.cuda_graph:
        return
    if config.device != "cuda":
        raise InvalidParameter(
            "cuda_graph", True, "only on device cuda (the CUDA provider's enable_cuda_graph)"
        )
    if (options.clients or 1) > 1:
        raise InvalidParameter("clients", options.clients, ONE_GRAPH)


def ort_options(config: BackendConfig) -> OnnxRuntimeOptions:
    """The config's options as ONNX Runtime's record, checked (kit.backends.options)."""
    return config.options_as(OnnxRuntimeOptions)


def device_id(config: BackendConfig) -> int:
    """The CUDA ordinal the options name (default 0), checked (kit.backends.options.DEVICE_ID)."""
    return ort_options(config).ordinal


def create_session(ort, path: Path, opts, providers: list, device: str):
    """An InferenceSession; on a GPU without ORT's Python fallback (a provider that fails at
    creation or in `run()` raises instead of silently handing the work to the next one)."""
    gpu = device != "cpu"
    try:
        if gpu:
            session = ort.InferenceSession(
                str(path), sess_options=opts, providers=providers, enable_fallback=0
            )
        else:
            session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
        if gpu:
            raise BackendUnavailable(
                f"{device.upper()} backend unavailable: ONNX Runtime cannot create a "
                f"{PROVIDERS[device][0]} session for {path.name} (fallback disabled): "
                f"{exc}"
            ) from exc
        raise CorruptModel(f"ONNX Runtime cannot load {path.name}: {exc}") from exc
    if gpu and callable(getattr(session, "disable_fallback", None)):
        session.disable_fallback()
    return session


def check_same_providers(device: str, before: list[str], now: list[str], when: str) -> None:
    """BackendUnavailable when the session's providers changed (ORT's run-time fallback)."""
    if list(now) != list(before):
        raise BackendUnavailable(
            f"{device.upper()} provider fell back {when}: ONNX Runtime switched from "
            f"{', '.join(before)} to {', '.join(now) or 'nothing'}; refusing to report a fallback "
            "run as this device"
        )


def check_first_provider(device: str, placed: list[str]) -> None:
    """BackendUnavailable unless the session's first provider is the one `device` asks for."""
    wanted = PROVIDERS[device][0]
    if not placed or placed[0] != wanted:
        raise BackendUnavailable(
            f"{device.upper()} backend unavailable: ONNX Runtime could not start {wanted} and fell "
            f"back to {', '.join(placed) or 'nothing'} (see ORT's warning above: CUDA, cuDNN or "
            "TensorRT libraries missing or mismatched?); refusing to report a fallback run as this "
            "device"
        )


def placement_from_profile(profile: Path) -> dict:
    """Kernels per provider in one profiled run, and the share on the CPU.

    Counts the kernels ORT executed after partitioning and fusion (a TensorRT subgraph is one
    kernel), each named once; the profile file is removed after reading.
    """
    try:
        events = json.loads(profile.read_text())
    finally:
        profile.unlink(missing_ok=True)
    providers: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if (
            event.get("cat") == "Node"
            and event.get("name", "").endswith("_kernel_time")
            and "provider" in args
        ):
            providers[event["name"]] = args["provider"]
    counts: dict[str, int] = {}
    for provider in providers.values():
        counts[provider] = counts.get(provider, 0) + 1
    total = sum(counts.values())
    return {
        "kernels_by_provider": counts,
        "kernels": total,
        "cpu_share": counts.get("CPUExecutionProvider", 0) / total if total else None,
        "method": "ORT profile of one warm-up run (enable_profiling; args.provider of each kernel)",
    }


def tensorrt_version() -> str | None:
    """The TensorRT libraries' version, from whichever distribution installed them."""
    return distribution_version(*TENSORRT_DISTRIBUTIONS)


class EngineBuilds:
    """The TensorRT provider's engine work in a session's making: from here (before the session is
    created: with static shapes the provider builds at creation, otherwise at the first run) to
    `account()` (after the warm-up run), and whether it built an engine or read every one from its
    engine cache: no `*.engine` file written there, new or over an old one (a rebuilt engine keeps
    its file name)."""

    def __init__(self, trt_options: dict):
        self.folder = Path(trt_options["trt_engine_cache_path"])
        self.caching = str(trt_options.get("trt_engine_cache_enable")).lower() in ("true", "1")
        self.before = self._engines()
        self.started = time.perf_counter()

    def _engines(self) -> dict[str, tuple[int, int]]:
        if not self.folder.is_dir():
            return {}
        return {
            p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in self.folder.glob("*.engine")
        }

    def account(self) -> dict[str, Any]:
        """`compile_s` (its seconds, as a torch.compile's) and `engine_reused`."""
        built = {n for n, stamp in self._engines().items() if self.before.get(n) != stamp}
        return {
            "compile_s": round(time.perf_counter() - self.started, 2),
            "engine_reused": self.caching and not built,  # no cache: built in memory every time
            "engines_built": sorted(built),
        }


#: TensorRT provider options that say where its caches are, not what they hold
CACHE_PLACES = ("trt_engine_cache_path", "trt_timing_cache_path", "device_id")


def trt_cache_dir(options: dict, gpu_name: str) -> Path:
    """Engines are valid for one TensorRT version, option set and GPU model: the folder says
    which."""
    keyed = {k: v for k, v in sorted(options.items()) if k not in CACHE_PLACES}
    text = json.dumps(
        {
            "trt": tensorrt_version(),
            "ort": onnxruntime_version(),
            "gpu": gpu_name,
            "options": keyed,
        },
        sort_keys=True,
        default=str,
    )
    return (
        cache_dir()
        / "tensorrt"
        / f"trt-{tensorrt_version() or 'unknown'}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"
    )


def quantization(config: BackendConfig) -> str | None:
    """The option quantization ('static-qdq' or 'dynamic'; int8 only), or None: the graph
    decides."""
    asked = ort_options(config).quantization
    if asked is not None and config.precision != "int8":
        raise InvalidParameter(
            "quantization", asked, "only with precision int8 (it picks the int8 method)"
        )
    return asked


def graph_optimization(config: BackendConfig) -> str:
    """The option graph_optimization (default ORT_ENABLE_ALL), checked where the options are
    read."""
    return ort_options(config).graph_level


def provider_options(config: BackendConfig, batch_size: int | None = None) -> dict[str, dict]:
    """Per-provider options; the option provider_options overrides them by provider name. With a
    `batch_size`, TensorRT's engines for it are kept apart from other batches' (`batch-N` under the
    engine cache the kit chose): the graph's batch axis is dynamic, and the provider, finding a
    cached engine whose profile lacks the batch, widens the profile and builds over it, so batches
    sharing one folder would rebuild each other's engines and run ones tuned for another batch.
    The layer timings stay shared: they are per layer and shape, and save a batch's build those
    another batch measured."""
    given = ort_options(config)
    ordinal = given.ordinal
    int8 = config.precision == "int8"
    options: dict[str, dict[str, Any]] = {
        "CUDAExecutionProvider": {
            "device_id": ordinal,
            **({"enable_cuda_graph": "1"} if given.cuda_graph else {}),
        },
        "TensorrtExecutionProvider": {
            "device_id": ordinal,
            # fp16 lets TensorRT pick half kernels where a layer is not quantized; int8 models
            # arrive as symmetric QDQ (explicit quantization: no calibration table)
            "trt_fp16_enable": config.precision in ("fp16", "int8"),
            "trt_int8_enable": int8,
            "trt_engine_cache_enable": True,
            # layer timings kept beside the engines: a batch's engine after the first one's
            # reuses the tactics measured for the layers they share instead of timing them again
            "trt_timing_cache_enable": True,
        },
    }
    for name, extra in (given.provider_options or {}).items():
        options.setdefault(name, {}).update(extra)
    trt = options["TensorrtExecutionProvider"]
    timings = trt.get("trt_engine_cache_path")  # the user's folder holds both, as given
    if timings is None:
        timings = str(trt_cache_dir(trt, _gpu_name(config)))
        trt["trt_engine_cache_path"] = str(
            Path(timings) / f"batch-{batch_size}" if batch_size else timings
        )
    if trt.get("trt_timing_cache_enable"):
        trt.setdefault("trt_timing_cache_path", timings)
    return options


def _gpu_name(config: BackendConfig) -> str:
    if config.device == "cpu":
        return ""

    try:
        return cuda_device(device_id(config)).name
    except KitError:
        return "unknown GPU"
