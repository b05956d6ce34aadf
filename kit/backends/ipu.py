"""Graphcore IPU through PopRT, driven out of process.

PopRT lives in a Python 3.8 environment (Poplar SDK or the graphcorecn/poprt image), the kit in
3.11, so every PopRT call happens in `ipu_worker.py`, started with the interpreter named by
KIT_IPU_PYTHON (default `python3`; a command such as `docker exec -i poprt python3` works when
paths are the same on both sides). Jobs and results are JSON; inputs travel as .npz files.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.backends.base import Backend, BackendConfig, Session
from kit.backends.ipu_settings import FP8_PARAMS, PACK_NOTE, SETTINGS
from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.measure import BatchMeasurement, MeasureConfig
from kit.models.spec import ExportedModel
from kit.paths import cache_dir

WORKER = Path(__file__).with_name("ipu_worker.py")
UNAVAILABLE = "IPU backend unavailable: PopRT not installed (needs the Poplar SDK; see README)"
EMULATED_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"
# Nominal peaks in GFLOP/s (reference/ipu_stack.md): C600 is ipu21; ipu2 is M2000 (GC200).
PEAKS = {"ipu21": ("Graphcore C600 (Mk2, ipu21)", {"fp32": 70e3, "fp16": 280e3, "fp8": 560e3}),
         "ipu2": ("Graphcore GC200 IPU (M2000; Bow is faster)", {"fp32": 62.5e3, "fp16": 250e3})}
_AVAILABILITY: dict[tuple[str, ...], str | None] = {}


class IpuWorkerError(KitError):
    """The PopRT worker failed (compile, load or run); the message carries its reason."""


def interpreter() -> list[str]:
    return shlex.split(os.environ.get("KIT_IPU_PYTHON", "python3"))


def worker_timeout_s() -> float:
    return float(os.environ.get("KIT_IPU_TIMEOUT_S", "7200"))


def call_worker(job: dict, workdir: Path) -> dict:
    """Run one job in the worker process and return its JSON result (fatal errors raise)."""
    job_path, result_path = workdir / "job.json", workdir / "result.json"
    job_path.write_text(json.dumps(job))
    cmd = [*interpreter(), str(WORKER), str(job_path), str(result_path)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=worker_timeout_s())
    except FileNotFoundError as exc:
        raise BackendUnavailable(UNAVAILABLE) from exc
    except subprocess.TimeoutExpired as exc:
        raise IpuWorkerError(f"PopRT worker timed out after {exc.timeout:.0f} s (KIT_IPU_TIMEOUT_S)") from exc
    if not result_path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise IpuWorkerError(f"PopRT worker exited with {proc.returncode}: {' | '.join(tail)}")
    result = json.loads(result_path.read_text())
    if "fatal" in result:
        raise IpuWorkerError(f"PopRT worker failed: {result['fatal']}")
    return result


def job_dir(base: Path | None = None) -> tempfile.TemporaryDirectory:
    """A scratch folder under the kit's cache (not /tmp): with KIT_IPU_PYTHON="docker exec ...",
    the worker only sees the paths mounted into its container."""
    root = Path(base or cache_dir()) / "ipu-jobs"
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix="job-", dir=root)


def decode_outputs(batch: dict) -> list[np.ndarray]:
    return [np.load(io.BytesIO(base64.b64decode(o["npy_b64"])), allow_pickle=False)
            for o in batch.get("outputs", [])]


@dataclass
class IpuBatch:
    """One batch size from one worker run: its measurement, outputs, or the error it hit."""

    batch_size: int
    measurement: BatchMeasurement | None = None
    outputs: list[np.ndarray] = field(default_factory=list)
    error: str | None = None
    info: dict = field(default_factory=dict)


class IpuSession(Session):
    """A model compiled (PopEF cached on disk) for one batch size; runs happen in the worker."""

    def __init__(self, backend: IpuBackend, model: ExportedModel, config: BackendConfig,
                 batch_size: int, description: dict):
        self.backend, self.model, self.config = backend, model, config
        self.batch_size, self.description = batch_size, description

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        batch = self.backend.run_batches(self.model, self.config, [self.batch_size],
                                         MeasureConfig(warmup=0), {self.batch_size: inputs},
                                         measure=False, return_outputs=True)[self.batch_size]
        if batch.error:
            raise IpuWorkerError(f"ipu batch {self.batch_size}: {batch.error}")
        return batch.outputs

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        raise KitError("ipu sessions are timed inside the PopRT worker process; use measure()")

    def measure(self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig) -> BatchMeasurement:
        if batch_size != self.batch_size:
            raise InvalidParameter("batch_size", batch_size, f"this session was compiled for {self.batch_size}")
        batch = self.backend.run_batches(self.model, self.config, [batch_size], cfg,
                                         {batch_size: inputs})[batch_size]
        if batch.error:
            raise IpuWorkerError(f"ipu batch {batch_size}: {batch.error}")
        return batch.measurement


    def measure_window(self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig,
                       sampler=None) -> BatchMeasurement:
        """Warm-up in one worker call, then the timed calls with power sampled around them."""
        from dataclasses import replace

        from kit.power import PowerMonitor, UnavailableSampler

        if cfg.warmup:
            self.measure(inputs, batch_size, replace(cfg, warmup=0, min_duration_s=0.0, min_count=cfg.warmup))
        with PowerMonitor(sampler or UnavailableSampler(["power not sampled in this run"])) as monitor:
            m = self.measure(inputs, batch_size, replace(cfg, warmup=0))
        m.power = monitor.summary(m.samples, m.throughput).to_dict()
        return m


class IpuBackend(Backend):
    name = "ipu"
    precisions = ("fp32", "fp16", "fp8")

    def availability(self) -> str | None:
        cmd = tuple(interpreter())
        if cmd not in _AVAILABILITY:
            try:
                proc = subprocess.run([*cmd, "-c", "import poprt"], capture_output=True, timeout=120)
                _AVAILABILITY[cmd] = None if proc.returncode == 0 else UNAVAILABLE
            except (OSError, subprocess.TimeoutExpired):
                _AVAILABILITY[cmd] = UNAVAILABLE
        return _AVAILABILITY[cmd]

    def require(self) -> None:
        reason = self.availability()
        if reason:
            raise BackendUnavailable(reason)

    def probe(self) -> dict:
        """PopRT version, worker Python, device (ipu version, count), test-double flag."""
        self.require()
        with job_dir() as tmp:
            return call_worker({"mode": "probe"}, Path(tmp))

    def device_info(self, config: BackendConfig) -> dict:
        env = self.probe()
        device = env.get("device", {})
        name, peaks = PEAKS.get(device.get("ipu_version"), ("unknown IPU", {}))
        info = {"kind": "ipu", "name": name, **device, "poprt_version": env.get("poprt_version"),
                "emulated": env.get("test_double", False)}
        gflops = peaks.get(config.precision)
        if info["emulated"]:
            info.update(peak=None, note=EMULATED_NOTE)
        elif gflops:
            info["peak"] = {"gflops": gflops, "precision": config.precision,
                            "method": "Graphcore's published peak for this IPU"}
        return info

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> IpuSession:
        """Convert and compile to a cached PopEF now (so run() and measure() reuse it)."""
        self.check_precision(config.precision)
        batch = self.run_batches(model, config, [batch_size], MeasureConfig(warmup=0),
                                 measure=False, return_outputs=False)[batch_size]
        if batch.error:
            raise IpuWorkerError(f"ipu could not compile {model.name} at batch {batch_size}: {batch.error}")
        return IpuSession(self, model, config, batch_size, self.describe(model, config, batch))

    def describe(self, model: ExportedModel, config: BackendConfig, batch: IpuBatch) -> dict:
        env, b = batch.info.get("env", {}), batch.info
        d = {"backend": self.name, "runtime": "PopRT", "precision": config.precision,
             "batch_size": batch.batch_size, "poprt_version": env.get("poprt_version"),
             "worker_python": env.get("python"), "interpreter": " ".join(interpreter()),
             "device": env.get("device"), "popef": Path(b.get("popef", "")).name,
             "compile_seconds": b.get("compile_seconds"), "popef_cached": b.get("popef_cached"),
             "converter_options": {k: v for k, v in b.get("converter_options", {}).items()
                                   if k != "input_shape"},
             "input_shape": b.get("converter_options", {}).get("input_shape"),
             "compiler_options": b.get("compiler_options"), "emulated": env.get("test_double", False)}
        if config.precision == "fp8":
            d["fp8_op_types"] = b.get("fp8_op_types", ["Conv", "MatMul", "Gemm"])
        if d["emulated"]:
            d["note"] = EMULATED_NOTE
        settings = SETTINGS.get(model.name)
        if settings and settings.pack_mode:
            d["pack_mode"] = PACK_NOTE
        return d

    def job(self, model: ExportedModel, config: BackendConfig, batch_sizes: list[int],
            cfg: MeasureConfig) -> dict:
        if cfg.replicas > 1:
            raise InvalidParameter("replicas", cfg.replicas, "PopRT has no replication; use clients")
        opts = config.options
        return {
            "onnx_path": str(Path(model.onnx_path).resolve()), "precision": config.precision,
            "fp8_params": opts.get("fp8_params", FP8_PARAMS), "batch_sizes": list(batch_sizes),
            "inputs": [spec.to_dict() for spec in model.inputs],
            "converter_options": opts.get("converter_options", {}),
            "compiler_options": opts.get("compiler_options", {}),
            "cache_dir": str(Path(opts.get("cache_dir", cache_dir() / "popef")).resolve()),
            "clients": cfg.clients, "warmup": cfg.warmup, "min_duration_s": cfg.min_duration_s,
            "min_count": cfg.min_count, "max_duration_s": cfg.max_duration_s,
        }

    def run_batches(self, model: ExportedModel, config: BackendConfig, batch_sizes: list[int],
                    cfg: MeasureConfig, inputs: dict[int, dict[str, np.ndarray]] | None = None, *,
                    measure: bool = True, return_outputs: bool = True, seed: int = 0) -> dict[int, IpuBatch]:
        """All batch sizes in one worker process; a failing batch size keeps its error, the
        others their results. Inputs default to the model's seeded inputs at each batch size."""
        self.require()
        self.check_precision(config.precision)
        job = self.job(model, config, batch_sizes, cfg)
        job.update(measure=measure, return_outputs=return_outputs, seed=seed)
        with job_dir(Path(job["cache_dir"])) as tmp:
            npz = {}
            for bs in batch_sizes:
                arrays = (inputs or {}).get(bs) or model.make_inputs(bs, seed)
                npz[str(bs)] = str(Path(tmp) / f"inputs-{bs}.npz")
                np.savez(npz[str(bs)], **arrays)
            job["inputs_npz"] = npz
            result = call_worker(job, Path(tmp))
        env = {k: v for k, v in result.items() if k != "batches"}
        return {b["batch_size"]: self._batch(b, env) for b in result["batches"]}

    @staticmethod
    def _batch(b: dict, env: dict) -> IpuBatch:
        info = {k: v for k, v in b.items() if k not in ("calls", "outputs")} | {"env": env}
        if b.get("error"):
            return IpuBatch(b["batch_size"], error=b["error"], info=info)
        measurement = None
        if b.get("calls"):
            calls = [[(int(s), int(e)) for s, e in thread] for thread in b["calls"]]
            mode = "clients" if len(calls) > 1 else "single"
            measurement = BatchMeasurement(b["batch_size"], mode, len(calls), calls)
            measurement.extra.update(
                backend="ipu", emulated=env.get("test_double", False),
                poprt_version=env.get("poprt_version"), compile_seconds=b.get("compile_seconds"),
                popef_cached=b.get("popef_cached"), timer="time.perf_counter_ns in the worker")
            if env.get("test_double"):
                measurement.extra["note"] = EMULATED_NOTE
        return IpuBatch(b["batch_size"], measurement, decode_outputs(b), None, info)
