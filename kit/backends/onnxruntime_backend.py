"""ONNX Runtime: CPU execution provider here; CUDA and TensorRT providers where installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.backends.base import BackendConfig, InProcessBackend, Session
from kit.environment import usable_cores
from kit.errors import BackendUnavailable, CorruptModel, InvalidParameter
from kit.models.spec import ExportedModel
from kit.paths import cache_dir

PROVIDERS = {"cpu": ["CPUExecutionProvider"],
             "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
             "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]}
UNSUPPORTED = {  # precision -> why ORT cannot run it, and what to use instead
    "bf16": "ONNX Runtime has no bf16 conversion path for CPU kernels; use backend 'torch' for bf16",
    "fp8": "ONNX Runtime CPU has no fp8 kernels; the FP8 rows map to int8 on CPU (see kit.precision_map)",
}
GRAPH_OPTIMIZATION = ("ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_BASIC", "ORT_DISABLE_ALL")


class OrtSession(Session):
    def __init__(self, session, description: dict, device: str = "cpu"):
        self.session = session
        self.description = description
        self.device = device
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self.output_names, inputs)

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """Inputs staged once (on the GPU for cuda/tensorrt); outputs left where ORT puts them."""
        binding = self.session.io_binding()
        for name, value in inputs.items():
            value = np.ascontiguousarray(value)
            if self.device == "cpu":
                binding.bind_cpu_input(name, value)
            else:
                import onnxruntime as ort

                binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0))
        for name in self.output_names:
            if self.device == "cpu":
                binding.bind_output(name)
            else:
                binding.bind_output(name, "cuda")
        run = self.session.run_with_iobinding

        def call() -> None:  # run_with_iobinding synchronises the provider's stream before returning
            run(binding)

        return call


class OnnxRuntimeBackend(InProcessBackend):
    name = "onnxruntime"
    precisions = ("fp32", "fp16", "int8")

    module = "onnxruntime"
    label = "ONNX Runtime"

    def check_precision(self, precision: str) -> None:
        if precision in UNSUPPORTED:
            raise InvalidParameter("precision", precision, UNSUPPORTED[precision])
        super().check_precision(precision)

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> OrtSession:
        import onnxruntime as ort

        self.check_precision(config.precision)
        providers = self.providers(config, ort.get_available_providers())
        path = self.prepare_model(model, config)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, graph_optimization(config))
        opts.intra_op_num_threads = config.threads or usable_cores()
        opts.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise CorruptModel(f"ONNX Runtime cannot load {path.name}: {exc}") from exc
        return OrtSession(session, self.describe(model, config, session, path, opts), config.device)

    def describe(self, model: ExportedModel, config: BackendConfig, session, path: Path, opts) -> dict:
        import onnxruntime as ort

        description = {
            "backend": self.name, "device": config.device, "providers": session.get_providers(),
            "precision": config.precision, "threads": opts.intra_op_num_threads,
            "graph_optimization": graph_optimization(config), "io_binding": True,
            "model_file": path.name, "ort_version": ort.__version__,
        }
        if config.precision != "fp32":
            from kit.backends.precision import conversion_label

            description["conversion"] = conversion_label(model, config.precision)
        return description

    def providers(self, config: BackendConfig, available: list[str]) -> list:
        """Provider list for the device, with options; BackendUnavailable where it is absent."""
        device = config.device
        if device not in PROVIDERS:
            raise BackendUnavailable(f"onnxruntime has no device {device!r}; use one of {list(PROVIDERS)}")
        wanted = PROVIDERS[device][0]
        if wanted not in available:
            raise BackendUnavailable(
                f"{device.upper()} backend unavailable: ONNX Runtime here has {', '.join(available)} "
                f"(needs {wanted}: install onnxruntime-gpu on a machine with an NVIDIA GPU)")
        options = provider_options(config)
        return [(p, options[p]) if p in options else p for p in PROVIDERS[device]]

    def prepare_model(self, model: ExportedModel, config: BackendConfig) -> Path:
        """The ONNX file to load at this precision (fp32: the export itself)."""
        if config.precision == "fp32":
            return model.onnx_path
        from kit.backends.precision import convert_for_ort

        return convert_for_ort(model, config.precision)


def graph_optimization(config: BackendConfig) -> str:
    """config.options['graph_optimization'] (default ORT_ENABLE_ALL), checked."""
    level = config.options.get("graph_optimization", "ORT_ENABLE_ALL")
    if level not in GRAPH_OPTIMIZATION:
        raise InvalidParameter("graph_optimization", level, f"one of {', '.join(GRAPH_OPTIMIZATION)}")
    return level


def provider_options(config: BackendConfig) -> dict[str, dict]:
    """Per-provider options; config.options['provider_options'] overrides them by provider name."""
    trt_cache = cache_dir() / "tensorrt"
    options = {
        "CUDAExecutionProvider": {"device_id": int(config.options.get("device_id", 0))},
        "TensorrtExecutionProvider": {
            "device_id": int(config.options.get("device_id", 0)),
            # fp16 lets TensorRT pick half kernels; int8 models arrive as QDQ (explicit quantization)
            "trt_fp16_enable": config.precision in ("fp16", "int8"),
            "trt_engine_cache_enable": True, "trt_engine_cache_path": str(trt_cache),
        },
    }
    for name, extra in config.options.get("provider_options", {}).items():
        options.setdefault(name, {}).update(extra)
    return options
