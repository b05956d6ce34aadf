"""The Qwant C2 protocol on the present hardware.

ResNeXt-101 32x4d; batch sizes 2..12 split across 2 replicas (micro batch = batch / 2, one session
per device or core group, run in parallel); latency per batch includes preprocessing real images
(decode, resize, normalise) and output retrieval; throughput = batch / latency; energy efficiency
= throughput / mean power where a power sensor exists, otherwise "unavailable" with the reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import cycle

from kit import published
from kit.backends import BackendConfig, require_backend
from kit.benchmark import new_result
from kit.environment import usable_cores
from kit.errors import InvalidParameter, KitError
from kit.images import image_files, preprocess_batch
from kit.measure import MeasureConfig, measure
from kit.models import load_model
from kit.results import RunResult

C2_MODEL = "resnext101-c2"


@dataclass(frozen=True)
class C2Config:
    batch_sizes: tuple[int, ...] = (2, 4, 6, 8, 10, 12)
    replicas: int = 2
    backend: str = "onnxruntime"
    precision: str = "fp32"
    device: str = "cpu"
    min_duration_s: float = 3.0
    min_count: int = 10
    warmup: int = 2
    image_dir: str = "skimage"
    small: bool = False
    weights: str = "random"
    power: str = "auto"  # which power sampler: auto, cpu, cuda, ipu, none

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_sizes", tuple(self.batch_sizes))
        for b in self.batch_sizes:
            if not isinstance(b, int) or b < self.replicas or b % self.replicas:
                raise InvalidParameter("batch_sizes", b, f"a multiple of replicas={self.replicas} (micro batch = batch / replicas)")
        if self.replicas < 1:
            raise InvalidParameter("replicas", self.replicas, ">= 1")

    def to_dict(self) -> dict:
        return asdict(self)


def run_c2_study(config: C2Config | dict) -> RunResult:
    params = config.to_dict() if isinstance(config, C2Config) else dict(config)
    result = new_result("c2_study", "c2_study", params)
    try:
        cfg = config if isinstance(config, C2Config) else C2Config(**config)
        result.parameters = cfg.to_dict()
        _run(cfg, result)
    except KitError as exc:
        result.fail(exc)
    return result


def _run(cfg: C2Config, result: RunResult) -> None:
    backend = require_backend(cfg.backend)
    model = load_model(C2_MODEL, small=cfg.small, weights=cfg.weights)
    from kit.benchmark import describe_model

    result.model = describe_model(model)
    size = model.inputs[0].shape[-1]
    encoded = [p.read_bytes() for p in image_files(cfg.image_dir)]
    threads = max(1, usable_cores() // cfg.replicas)
    bcfg = BackendConfig(cfg.precision, cfg.device, threads)
    result.backend = {"name": backend.name, **bcfg.to_dict(), "device_info": backend.device_info(bcfg),
                      "replicas": cfg.replicas, "threads_per_replica": threads}
    sampler = _sampler(cfg.power)
    rows = []
    for batch in cfg.batch_sizes:
        micro = batch // cfg.replicas
        sessions = [backend.load(model, bcfg, micro) for _ in range(cfg.replicas)]
        result.backend["session"] = sessions[0].description
        calls = [_pipeline_call(s, model.inputs[0].name, encoded, micro, size, i) for i, s in enumerate(sessions)]
        mcfg = MeasureConfig(warmup=cfg.warmup, min_duration_s=cfg.min_duration_s,
                             min_count=cfg.min_count, replicas=cfg.replicas)
        m, power = _measure_with_power(calls, micro, mcfg, sampler)
        m.power = power
        result.measurements.append(m.to_dict())
        rows.append(c2_row(batch, micro, m, power))
        for s in sessions:
            s.close()
    result.tables["c2"] = rows
    result.tables["published"] = published.c2_tables().reset_index().to_dict("records")


def _pipeline_call(session, input_name: str, encoded: list[bytes], micro: int, size: int, offset: int):
    """Preprocess the next micro batch of images, run, and fetch the outputs to host memory."""
    images = cycle(encoded[offset % len(encoded):] + encoded[: offset % len(encoded)])

    def call():
        batch = preprocess_batch([next(images) for _ in range(micro)], size)
        return session.run({input_name: batch})

    return call


def c2_row(batch: int, micro: int, m, power: dict | None) -> dict:
    latency_ms = m.latency.mean_ms  # each replica's call handles one micro batch, in parallel
    throughput = batch / (latency_ms / 1000.0)
    row = {"batch_size": batch, "micro_batch": micro, "latency_ms": latency_ms,
           "latency_p99_ms": m.latency.p99_ms, "throughput": throughput,
           "throughput_wall": m.throughput, "efficiency": None}
    if power and power.get("method") == "measured" and power.get("mean_w"):
        row["efficiency"] = throughput / power["mean_w"]
        row["power_w"] = power["mean_w"]
        row["power_sensor"] = power.get("sensor")
    else:
        row["efficiency_reason"] = f"power unavailable: {(power or {}).get('reason', 'no sampler')}"
    return row


def _sampler(kind: str):
    if kind == "none":
        return None
    try:
        from kit.power import select_sampler
    except ImportError:
        return None
    return select_sampler(kind)


def _measure_with_power(calls, micro, mcfg, sampler):
    if sampler is None:
        return measure(calls, micro, mcfg), {"method": "unavailable", "reason": "power sampling off"}
    from kit.power import PowerMonitor

    with PowerMonitor(sampler) as monitor:
        m = measure(calls, micro, mcfg)
    return m, monitor.summary(samples_processed=m.samples).to_dict()


def config_for_hardware(hardware: str, backend: str = "", **kwargs) -> C2Config:
    """C2Config for 'cpu', 'cuda' or 'ipu': the backend and device that hardware uses."""
    plans = {"cpu": ("onnxruntime", "cpu"), "cuda": ("onnxruntime", "cuda"), "ipu": ("ipu", "ipu")}
    if hardware not in plans:
        raise InvalidParameter("hardware", hardware, f"one of {', '.join(plans)}")
    default_backend, device = plans[hardware]
    return C2Config(backend=backend or default_backend, device=device, **kwargs)
