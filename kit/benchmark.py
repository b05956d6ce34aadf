"""One published row benchmarked end to end: export, load per batch size, numerics, timing.

The model notebook calls `run_model_benchmark(ModelBenchmarkConfig(...))` and gets a RunResult
whatever happens: a bad parameter or a missing backend becomes a one-line error in the result.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kit import environment
from kit.backends import BackendConfig, require_backend
from kit.errors import InvalidParameter, KitError
from kit.measure import MeasureConfig
from kit.models import ExportedModel, load_model
from kit.models.spec import validate_batch_size
from kit.numerics import NumericDiff
from kit.results import RunResult

PUBLISHED_PRECISIONS = ("FP16", "FP8")


@dataclass(frozen=True)
class ModelBenchmarkConfig:
    """The model notebook's parameters, validated."""

    model: str = "resnet50-torch-fp32"
    backend: str = "onnxruntime"
    precision: str = "fp32"
    device: str = "cpu"
    batch_sizes: tuple[int, ...] = (1, 4)
    clients: int = 1
    replicas: int = 1
    warmup: int = 5
    min_duration_s: float = 2.0
    min_count: int = 20
    weights: str = "random"
    small: bool = False
    seed: int = 0
    published_precision: str = "FP16"
    input_shapes: dict = field(default_factory=dict)  # for a user's .onnx with dynamic dims
    threads: int | None = None
    check_numerics: bool = True
    power: bool = True  # sample the device's power during timing (where a sensor exists)
    accuracy: bool = True  # run the published accuracy check (needs data and real weights)
    dataset_dir: str = ""  # default data/datasets/<dataset>/
    data_percent: float = 100.0
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        sizes = (self.batch_sizes,) if isinstance(self.batch_sizes, int) else tuple(self.batch_sizes)
        if not sizes:
            raise InvalidParameter("batch_sizes", self.batch_sizes, "at least one batch size")
        for b in sizes:
            validate_batch_size(b)
        object.__setattr__(self, "batch_sizes", sizes)
        if self.published_precision not in PUBLISHED_PRECISIONS:
            raise InvalidParameter("published_precision", self.published_precision,
                                   f"one of {', '.join(PUBLISHED_PRECISIONS)}")
        BackendConfig(self.precision, self.device, self.threads)  # validates precision/threads
        self.measure_config()  # validates timing parameters

    def measure_config(self) -> MeasureConfig:
        return MeasureConfig(warmup=self.warmup, min_duration_s=self.min_duration_s,
                             min_count=self.min_count, clients=self.clients, replicas=self.replicas)

    def backend_config(self) -> BackendConfig:
        return BackendConfig(self.precision, self.device, self.threads, dict(self.options))

    def to_dict(self) -> dict:
        return asdict(self)


def new_result(kind: str, name: str, parameters: dict) -> RunResult:
    return RunResult(kind=kind, name=name, parameters=parameters, environment=environment.capture())


def run_model_benchmark(config: ModelBenchmarkConfig | dict) -> RunResult:
    """Benchmark one model on one backend at every batch size; never raises a KitError."""
    params = config.to_dict() if isinstance(config, ModelBenchmarkConfig) else dict(config)
    result = new_result("model_benchmark", str(params.get("model")), params)
    try:
        cfg = config if isinstance(config, ModelBenchmarkConfig) else ModelBenchmarkConfig(**config)
        result.parameters = cfg.to_dict()  # with the defaults filled in
        _run(cfg, result)
    except KitError as exc:
        result.fail(exc)
    except TypeError as exc:  # unknown parameter names
        result.fail(InvalidParameter("parameters", sorted(params), str(exc)))
    return result


def _run(cfg: ModelBenchmarkConfig, result: RunResult) -> None:
    from kit.precision_map import mapping_sentence

    hardware = cfg.device if cfg.device in ("ipu", "cuda") else "cpu"
    result.notes.append(mapping_sentence(hardware))
    backend = require_backend(cfg.backend)
    model = load_model(cfg.model, small=cfg.small, weights=cfg.weights, seed=cfg.seed,
                       input_shapes=cfg.input_shapes or None)
    result.model = describe_model(model)
    bcfg = cfg.backend_config()
    result.backend = {"name": backend.name, **bcfg.to_dict(), "device_info": backend.device_info(bcfg)}
    reference = require_backend("onnxruntime") if cfg.check_numerics or cfg.accuracy else None
    sampler = power_sampler(cfg.device, cfg.power)
    for i, batch in enumerate(cfg.batch_sizes):
        try:
            measure_one_batch(cfg, backend, reference, model, batch, result, sampler, with_accuracy=i == 0)
        except KitError as exc:
            result.fail(f"batch {batch}: {exc}")


def measure_one_batch(cfg: ModelBenchmarkConfig, backend, reference, model: ExportedModel,
                      batch: int, result: RunResult, sampler, with_accuracy: bool = False) -> None:
    inputs = model.make_inputs(batch, seed=cfg.seed)
    sessions = [backend.load(model, cfg.backend_config(), batch) for _ in range(cfg.replicas)]
    ref_session = None
    if reference is not None:  # the run itself is the reference when it is ORT fp32 on the CPU
        same = (cfg.backend, cfg.precision, cfg.device) == ("onnxruntime", "fp32", "cpu")
        ref_session = sessions[0] if same else reference.load(model, BackendConfig("fp32", "cpu"), batch)
    try:
        result.backend["session"] = sessions[0].description
        if cfg.check_numerics:
            name = ("onnxruntime fp32 CPU (this run is the reference)" if ref_session is sessions[0]
                    else "onnxruntime fp32 CPU")
            diff = NumericDiff.between(ref_session.run(inputs), sessions[0].run(inputs), name)
            result.numerics.append({"batch_size": batch, **diff.to_dict()})
        measurement = timed(sessions, inputs, batch, cfg.measure_config(), sampler)
        result.measurements.append(measurement.to_dict())
        if with_accuracy and cfg.accuracy:
            result.accuracy.append(check_accuracy(cfg, model, sessions[0], ref_session, batch))
    finally:
        for s in {id(s): s for s in [*sessions, ref_session] if s is not None}.values():
            s.close()


def check_accuracy(cfg: ModelBenchmarkConfig, model: ExportedModel, session, ref_session, batch: int) -> dict:
    """The published accuracy/numeric metric, or the reason it cannot be measured here."""
    from kit.datasets import evaluate_accuracy

    try:
        return evaluate_accuracy(model.name, session, cfg.dataset_dir or None, cfg.data_percent,
                                 model.weights, batch_size=batch, model=model,
                                 reference_session=ref_session)
    except KitError as exc:
        return {"model": model.name, "status": f"not measured: {exc}", "value": None}


def power_sampler(device: str, enabled: bool = True):
    """The power sampler for `device` ('cpu', 'cuda', 'ipu'), or an unavailable one saying why."""
    from kit.power import UnavailableSampler, enable_ipu_monitoring, select_sampler

    if not enabled:
        return UnavailableSampler(["power sampling switched off (power=False)"])
    if device == "ipu":
        enable_ipu_monitoring()  # GCDA_MONITOR=1 for the worker process, or no sensor values
    return select_sampler(device)


def timed(sessions: list, inputs: dict, batch: int, mcfg: MeasureConfig, sampler):
    """Clients share sessions[0]; replicas each time their own session in parallel.

    The sampler reads the device's power during the timed calls only.
    """
    from kit.measure import measure
    from kit.power import PowerMonitor, measure_with_power

    if len(sessions) == 1:
        return measure_with_power(sessions[0], inputs, batch, mcfg, sampler)
    with PowerMonitor(sampler) as monitor:
        m = measure([s.bind(inputs) for s in sessions], batch, mcfg)
    m.power = monitor.summary(m.samples, m.throughput).to_dict()
    return m


def describe_model(model: ExportedModel) -> dict:
    d = model.to_dict()
    d["onnx_file"] = model.onnx_path.name
    d["onnx_bytes"] = model.onnx_path.stat().st_size if model.onnx_path.exists() else None
    return d
