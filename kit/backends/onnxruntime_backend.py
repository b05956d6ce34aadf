"""ONNX Runtime: CPU execution provider here; CUDA and TensorRT providers where installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.backends.base import Backend, BackendConfig, Session
from kit.environment import cpu_model, cpu_peak_gflops, gpu_names, usable_cores
from kit.errors import BackendUnavailable, CorruptModel
from kit.models.spec import ExportedModel

PROVIDERS = {"cpu": ["CPUExecutionProvider"],
             "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
             "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]}


class OrtSession(Session):
    def __init__(self, session, description: dict):
        self.session = session
        self.description = description
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self.output_names, inputs)

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        binding = self.session.io_binding()
        for name, value in inputs.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        for name in self.output_names:
            binding.bind_output(name)
        run = self.session.run_with_iobinding

        def call() -> None:
            run(binding)

        return call


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    precisions = ("fp32", "fp16", "int8")

    def availability(self) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "ONNX Runtime backend unavailable: onnxruntime is not installed"
        return None

    def device_info(self, config: BackendConfig) -> dict:
        if config.device == "cpu":
            return {"kind": "cpu", "name": cpu_model(), "cores": usable_cores(),
                    "peak": cpu_peak_gflops(config.precision)}
        return {"kind": "gpu", "name": ", ".join(gpu_names()) or "unknown GPU"}

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> OrtSession:
        import onnxruntime as ort

        self.check_precision(config.precision)
        providers = self._providers(config.device, ort.get_available_providers())
        path = self.prepare_model(model, config)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = config.threads or usable_cores()
        opts.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise CorruptModel(f"ONNX Runtime cannot load {path.name}: {exc}") from exc
        return OrtSession(session, {
            "backend": self.name, "providers": session.get_providers(),
            "precision": config.precision, "threads": opts.intra_op_num_threads,
            "model_file": path.name, "ort_version": ort.__version__,
        })

    def _providers(self, device: str, available: list[str]) -> list[str]:
        if device not in PROVIDERS:
            raise BackendUnavailable(f"onnxruntime has no device {device!r}; use one of {list(PROVIDERS)}")
        wanted = PROVIDERS[device][0]
        if wanted not in available:
            raise BackendUnavailable(
                f"{device.upper()} backend unavailable: ONNX Runtime here has {', '.join(available)} "
                f"(needs {wanted}: install onnxruntime-gpu on a machine with an NVIDIA GPU)")
        return PROVIDERS[device]

    def prepare_model(self, model: ExportedModel, config: BackendConfig) -> Path:
        """The ONNX file to load at this precision (fp32: the export itself)."""
        if config.precision == "fp32":
            return model.onnx_path
        from kit.backends.precision import convert_for_ort

        return convert_for_ort(model, config.precision)
