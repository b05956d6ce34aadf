"""The Qwant C2 protocol on the present hardware.

ResNeXt-101 32x4d; batch sizes 2..12 split across replicas (micro batch = batch / replicas, one
session per device or core group, run in parallel); latency per batch includes preprocessing real
images (decode, resize, normalise) and output retrieval; throughput = batch / latency; energy
efficiency = throughput / mean power of the device the study ran on, where it has a sensor,
otherwise "unavailable" with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import cycle
from typing import Any

from kit import progress
from kit.backends import BackendConfig, export_opset, require_backend
from kit.datasets.images import image_files, preprocess_batch
from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.hardware.environment import usable_cores
from kit.measure.power import sampler_for
from kit.measure.power.summary import indicative
from kit.measure.time_account import phase as timed_phase
from kit.measure.time_account import timing_detail
from kit.measure.window import BatchMeasurement, MeasureConfig, time_limit, timed_window
from kit.models import load_model
from kit.models.requests import ExportRequest
from kit.published import figures as published
from kit.results import BackendInfo, ResultKind, RunResult
from kit.results.reasons import ReasonCode
from kit.results.session import Session
from kit.studies.base import RunsOnBackend, closing_all, run_study

C2_MODEL = "resnext101-c2"


@dataclass(frozen=True, kw_only=True)
class Config(RunsOnBackend):
    batch_sizes: tuple[int, ...] = (2, 4, 6, 8, 10, 12)
    replicas: int = 2
    # the notebook's defaults (tests/studies/test_parameters.py): Run All in about 1 min
    min_duration_s: float = 2.0
    min_count: int = 5
    warmup: int = 2
    target_ci: float = 0.02  # stop once the 95 % half-width is this narrow (0: no target)
    # per batch size, the time limit; 0: 10 x min_duration_s, at least 5 s
    max_duration_s: float = 6.0
    image_dir: str = "skimage"
    small: bool = False
    weights: str = "random"
    power: bool = True  # sample the power of `device` over the timed calls

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.replicas < 1:
            raise InvalidParameter("replicas", self.replicas, ">= 1")
        if not self.batch_sizes:
            raise InvalidParameter("batch_sizes", self.batch_sizes, "at least one batch size")
        for b in self.batch_sizes:
            if b < self.replicas or b % self.replicas:
                raise InvalidParameter(
                    "batch_sizes",
                    b,
                    f"a multiple of replicas={self.replicas} (micro batch = batch / replicas)",
                )
        self.measure_config()

    def measure_config(self) -> MeasureConfig:
        return MeasureConfig(
            warmup=self.warmup,
            min_duration_s=self.min_duration_s,
            min_count=self.min_count,
            replicas=self.replicas,
            target_ci=self.target_ci,
            max_duration_s=time_limit(self.min_duration_s, self.max_duration_s),
        )

    def exports(self) -> list[ExportRequest]:
        return [ExportRequest(C2_MODEL, self.small, self.weights, opset=export_opset(self.backend))]


def run(config: Config | dict) -> RunResult:
    """Tables 1-3 of the C2 paper measured here; never raises for a failure."""
    return run_study(ResultKind.C2_STUDY, Config, config, execute, name=lambda p: "c2_study")


def execute(cfg: Config, result: RunResult) -> None:
    backend = require_backend(cfg.backend)
    with (
        progress.step(f"model {C2_MODEL}: exporting to ONNX (or the cached export)"),
        timed_phase("export", detail=C2_MODEL),
    ):
        model = load_model(
            C2_MODEL, small=cfg.small, weights=cfg.weights, opset=backend.export_opset
        )
    result.model = model.info()
    result.notes.append(f"Precision: {cfg.note()}.")
    size = model.inputs[0].shape[-1]
    encoded = [p.read_bytes() for p in image_files(cfg.image_dir)]
    device_info = backend.device_info(BackendConfig(cfg.precision, cfg.device, kind=cfg.hardware))
    asked = cfg.replicas
    cfg, deviation = replicas_here(cfg, device_info)
    threads = max(1, usable_cores() // cfg.replicas)
    bcfg = BackendConfig(cfg.precision, cfg.device, threads, kind=cfg.hardware)
    result.backend = BackendInfo.from_dict(
        {
            "name": backend.name,
            **bcfg.to_dict(),
            "device_info": device_info,
            "replicas": cfg.replicas,
            "replicas_asked": asked,
            "threads_per_replica": threads,
            **({"deviation": deviation} if deviation else {}),
        }
    )
    if deviation:
        result.notes.append(f"Deviation from the C2 paper: {deviation}.")
    sampler = sampler_for(cfg.hardware, cfg.power)
    paper = published.c2_tables().reset_index().to_dict("records")
    result.tables = result.tables.with_table("published", paper).with_table("c2", ())
    rounds = progress.rounds(
        cfg.batch_sizes, f"C2 study on {backend.name} {cfg.precision}", unit="batch size"
    )
    for batch in rounds:
        micro = batch // cfg.replicas
        sessions: list = []
        with closing_all(sessions):
            rounds.note(f"batch {batch}: compiling")
            with (
                progress.step(f"batch {batch}: compiling {cfg.replicas} x micro batch {micro}"),
                timed_phase(
                    "compile",
                    batch,
                    f"{cfg.replicas} x {backend.name} {cfg.precision}, micro batch {micro}",
                ),
            ):
                sessions += [backend.load(model, bcfg, micro) for _ in range(cfg.replicas)]
            result.backend = replace(
                result.backend, session=Session.from_dict(sessions[0].description)
            )
            calls = [
                _pipeline_call(s, model.inputs[0].name, encoded, micro, size, i)
                for i, s in enumerate(sessions)
            ]
            rounds.note(progress.timed_note(f"batch {batch}", cfg.measure_config()))
            with timed_phase("timing", batch) as phase:
                m = timed_window(calls, micro, cfg.measure_config(), sampler)
                phase.detail = timing_detail(m, cfg.measure_config())
        result.measurements.append(m.record())
        result.tables = result.tables.adding("c2", c2_row(batch, micro, m))


def replicas_here(cfg: Config, device_info: dict) -> tuple[Config, str | None]:
    """The config with replicas = min(asked, devices) on an IPU machine (one session per IPU; a C600
    card has one), and the deviation from the paper's 2 replicas said in words; else unchanged."""
    devices = device_info.get("num_devices")
    kind = kinds.of_class(str(device_info.get("kind")))
    if (
        kind is None
        or not kind.session_per_device
        or devices is None
        or int(devices) >= cfg.replicas
    ):
        return cfg, None
    if int(devices) < 1:
        raise InvalidParameter(
            "replicas", cfg.replicas, f"an IPU to run on: PopRT sees {devices} IPU(s)"
        )
    used = int(devices)
    deviation = (
        f"{used} replica(s) instead of the paper's {cfg.replicas}: this machine has {used} IPU(s) "
        f"({device_info.get('name', 'IPU')}) and each replica's session holds one; the whole batch "
        f"runs as micro batch = batch / {used}"
    )
    return replace(cfg, replicas=used), deviation


def _pipeline_call(
    session, input_name: str, encoded: list[bytes], micro: int, size: int, offset: int
):
    """Preprocess the next micro batch of images, run, and fetch the outputs to host memory."""
    images = cycle(encoded[offset % len(encoded) :] + encoded[: offset % len(encoded)])

    def call():
        batch = preprocess_batch([next(images) for _ in range(micro)], size)
        return session.run({input_name: batch})

    return call


def c2_row(batch: int, micro: int, m: BatchMeasurement) -> dict:
    latency_ms = m.latency.mean_ms  # each replica's call handles one micro batch, in parallel
    throughput = batch / (latency_ms / 1000.0)
    power = m.power or {}
    row: dict[str, Any] = {
        "batch_size": batch,
        "micro_batch": micro,
        "latency_ms": latency_ms,
        "latency_p99_ms": m.latency.p99_ms,
        "throughput": throughput,
        "throughput_wall": m.throughput,
        "efficiency": None,
    }
    if power.get("method") == "measured" and power.get("mean_w"):
        row["efficiency"] = throughput / power["mean_w"]
        row["power_w"] = power["mean_w"]
        row["power_sensor"] = power.get("sensor")
        row["efficiency_indicative"] = indicative(power)  # '' where the sensor resolves the window
    else:
        row["efficiency_reason"] = f"power unavailable: {power.get('reason', 'not sampled')}"
        row["efficiency_reason_code"] = str(ReasonCode.POWER_UNAVAILABLE)
    return row
