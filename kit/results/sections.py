"""Each section of a result as a typed, read-only record: what publishing reads, by attribute.

A run writes its sections as plain dicts (`RunResult.model`, `.backend`, `.environment`,
`.measurements`, `.accuracy`, `.tables`); publishing reads them back through these records
(`RunResult.sections`), so a key a run did not write is a default here, once, not an `or {}` in
every reader. Each record's `from_dict` reads what this kit and older ones wrote (schema 1, after
`kit.results.schema.upgrade`); an unknown key is ignored. Nothing here recomputes a figure: a
record holds the figure the run stored.

>>> m = Measurement.from_dict({"batch_size": 4, "mode": "single", "threads": 1, "throughput": 9.5,
...                            "qps_bytemlperf": 10.0, "extra": {"pack_batch_size": 8}})
>>> m.measured_batch, m.bytemlperf.qps, m.latency.mean_ms
(8, None, None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kit.results.reasons import DifferenceCode, Reason, difference_code
from kit.results.tables import Tables
from kit.results.values import Json, _map, _rows, _strings
from kit.results.windows import AccuracyCheck, Measurement, NumericCheck

# --- the model ----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Weights:
    """Where the model's weights came from: `source` 'random' or where real ones were read."""

    source: str | None = None
    label: str = ""

    @classmethod
    def from_dict(cls, d: object) -> Weights:
        d = _map(d)
        return cls(source=d.get("source"), label=str(d.get("label") or ""))


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """The model a run measured (`kit.models` `describe()`)."""

    name: str | None = None
    params: int | None = None
    flops_per_sample: float | None = None
    flops_shared_per_call: float | None = None
    onnx_file: str | None = None
    onnx_path: str | None = None
    opset: int | None = None
    weights: Weights = field(default_factory=Weights)

    @classmethod
    def from_dict(cls, d: object) -> ModelInfo:
        d = _map(d)
        return cls(name=d.get("name"), params=d.get("params"), flops_per_sample=d.get("flops_per_sample"),
                   flops_shared_per_call=d.get("flops_shared_per_call"), onnx_file=d.get("onnx_file"),
                   onnx_path=d.get("onnx_path"), opset=d.get("opset"),
                   weights=Weights.from_dict(d.get("weights")))

    @property
    def random_weights(self) -> bool:
        return self.weights.source == "random"


# --- the backend --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Peak:
    """The device's nominal peak at the run's precision (`gflops`), and how it was found."""

    gflops: float | None = None
    method: str = ""

    @classmethod
    def from_dict(cls, d: object) -> Peak:
        d = _map(d)
        return cls(gflops=d.get("gflops"), method=str(d.get("method") or ""))


@dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """The device a backend ran on: its name, kind (cpu, gpu, ipu) and nominal peak."""

    name: str | None = None
    kind: str | None = None
    peak: Peak = field(default_factory=Peak)

    @classmethod
    def from_dict(cls, d: object) -> DeviceInfo:
        d = _map(d)
        return cls(name=d.get("name"), kind=d.get("kind"), peak=Peak.from_dict(d.get("peak")))


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a GPU session's kernels ran, from its profiled warm-up (none off the GPU)."""

    kernels: int = 0
    kernels_by_provider: Json = field(default_factory=dict)
    cpu_share: float | None = None
    method: str = ""

    @classmethod
    def from_dict(cls, d: object) -> Placement:
        d = _map(d)
        return cls(kernels=d.get("kernels") or 0, kernels_by_provider=_map(d.get("kernels_by_provider")),
                   cpu_share=d.get("cpu_share"), method=str(d.get("method") or ""))

    @property
    def on_cpu(self) -> int:
        """How many of the kernels ONNX Runtime placed on the host CPU."""
        return int(self.kernels_by_provider.get("CPUExecutionProvider", 0))


@dataclass(frozen=True, kw_only=True)
class Session:
    """A backend session's description. What publishing judges by is typed; `items` keeps every
    setting as the backend wrote it (they differ per backend), for showing and comparing."""

    comparable: bool | None = None
    missing_passes: tuple[str, ...] = ()
    not_comparable: tuple[str, ...] = ()
    not_comparable_codes: tuple[str, ...] = ()  # each reason's DifferenceCode, in the same order
    poprt_version: str | None = None
    compile_seconds: float | None = None
    placement: Placement = field(default_factory=Placement)
    items: Json = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: object) -> Session:
        d = _map(d)
        return cls(comparable=d.get("comparable"), missing_passes=_strings(d.get("missing_passes")),
                   not_comparable=_strings(d.get("not_comparable")),
                   not_comparable_codes=_strings(d.get("not_comparable_codes")), poprt_version=d.get("poprt_version"),
                   compile_seconds=d.get("compile_seconds"), placement=Placement.from_dict(d.get("placement")),
                   items=d)

    @property
    def differences(self) -> tuple[Reason, ...]:
        """Each reason the session gave for not being ByteMLPerf's recipe, with its code (SESSION,
        said by its sentence, where a description has fewer codes than reasons)."""
        codes = self.not_comparable_codes + (DifferenceCode.SESSION,) * len(self.not_comparable)
        return tuple(Reason(text, difference_code(code)) for text, code in zip(self.not_comparable, codes, strict=False))

    def scalars(self) -> dict[str, str | int | float | bool]:
        """The settings that are one value each (what two runs' sessions are compared by)."""
        return {k: v for k, v in self.items.items() if isinstance(v, str | int | float | bool)}


@dataclass(frozen=True, kw_only=True)
class BackendInfo:
    """What ran the model: the backend, precision and device, its options, device and session."""

    name: str | None = None
    precision: str | None = None
    device: str | None = None
    options: Json = field(default_factory=dict)
    device_info: DeviceInfo = field(default_factory=DeviceInfo)
    session: Session = field(default_factory=Session)
    raw: Json = field(default_factory=dict)  # as written, for kit.hardware.parts.MeasuredOn.from_backend

    @classmethod
    def from_dict(cls, d: object) -> BackendInfo:
        d = _map(d)
        return cls(name=d.get("name"), precision=d.get("precision"), device=d.get("device"),
                   options=_map(d.get("options")), device_info=DeviceInfo.from_dict(d.get("device_info")),
                   session=Session.from_dict(d.get("session")), raw=d)

    @property
    def compiled(self) -> bool:
        """Run compiled: the compile option, unless the session fell back to eager (a compile that
        failed, e.g. past dynamo's recompile limit, records why as its `compile_fallback`)."""
        return bool(self.options.get("compile")) and not self.session.items.get("compile_fallback")


# --- the environment ----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Cpu:
    model: str | None = None
    cores: int | None = None

    @classmethod
    def from_dict(cls, d: object) -> Cpu:
        d = _map(d)
        return cls(model=d.get("model"), cores=d.get("cores"))


@dataclass(frozen=True, kw_only=True)
class KitSource:
    """The kit that wrote a result: its git commit (None when installed) and local changes."""

    commit: str | None = None
    dirty: bool = False
    diff_sha256: str | None = None
    version: str | None = None

    @classmethod
    def from_dict(cls, d: object) -> KitSource | None:
        if not isinstance(d, Mapping) or not d:
            return None  # a result from before the kit's commit was recorded
        return cls(commit=d.get("commit"), dirty=bool(d.get("dirty")), diff_sha256=d.get("diff_sha256"),
                   version=d.get("version"))


@dataclass(frozen=True, kw_only=True)
class Environment:
    """Where a result was measured (`kit.hardware.environment.capture()`)."""

    host: str | None = None
    os: str | None = None
    python: str | None = None
    cpu: Cpu = field(default_factory=Cpu)
    gpus: tuple[str, ...] | None = None  # None: not recorded
    ipu_present: bool | None = None
    packages: Json = field(default_factory=dict)
    threads: Json = field(default_factory=dict)
    distributions: Json = field(default_factory=dict)
    allocator: str = ""
    kit: KitSource | None = None
    rerun: str | None = None  # the command that re-runs a batch job's result

    @classmethod
    def from_dict(cls, d: object) -> Environment:
        d = _map(d)
        return cls(host=d.get("host"), os=d.get("os"), python=d.get("python"), cpu=Cpu.from_dict(d.get("cpu")),
                   gpus=_strings(d["gpus"]) if "gpus" in d else None, ipu_present=d.get("ipu_present"),
                   packages=_map(d.get("packages")),
                   threads=_map(d.get("threads")), distributions=_map(d.get("distributions")),
                   allocator=str(d.get("allocator") or ""), kit=KitSource.from_dict(d.get("kit")),
                   rerun=_map(d.get("job")).get("rerun"))

    def fact(self, key: str) -> object:
        """One of the facts two runs' environments are compared by (host, os, python, gpus, ipu_present)."""
        gpus = None if self.gpus is None else list(self.gpus)
        return {"host": self.host, "os": self.os, "python": self.python, "gpus": gpus,
                "ipu_present": self.ipu_present}[key]


# --- a result's sections together ---------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Resources:
    """What the run's process used at its peak (`kit.measure.memory.resources()`)."""

    peak_rss_bytes: int | None = None

    @classmethod
    def from_dict(cls, d: object) -> Resources:
        peak = _map(d).get("peak_rss_bytes")
        if isinstance(peak, float) and math.isfinite(peak):
            peak = round(peak)  # bytes: a count, whole even where JSON wrote it as a float
        return cls(peak_rss_bytes=peak if isinstance(peak, int) and not isinstance(peak, bool) else None)


class Sections:
    """Every section of one result as records (`RunResult.sections`), each read when first asked
    for; `model` and `backend` are None where the run wrote none (it failed first)."""

    def __init__(self, *, model: object, backend: object, environment: object, measurements: object,
                 numerics: object = (), accuracy: object, tables: object, resources: object = None) -> None:
        self._model, self._backend, self._environment, self._resources = model, backend, environment, resources
        self._measurements, self._numerics, self._accuracy, self._tables = measurements, numerics, accuracy, tables

    @cached_property
    def model(self) -> ModelInfo | None:
        return ModelInfo.from_dict(self._model) if isinstance(self._model, Mapping) and self._model else None

    @cached_property
    def backend(self) -> BackendInfo | None:
        present = isinstance(self._backend, Mapping) and self._backend
        return BackendInfo.from_dict(self._backend) if present else None

    @cached_property
    def environment(self) -> Environment:
        return Environment.from_dict(self._environment)

    @cached_property
    def measurements(self) -> tuple[Measurement, ...]:
        return tuple(Measurement.from_dict(m) for m in _rows(self._measurements))

    @cached_property
    def numerics(self) -> tuple[NumericCheck, ...]:
        return tuple(NumericCheck.from_dict(n) for n in _rows(self._numerics))

    @cached_property
    def accuracy(self) -> tuple[AccuracyCheck, ...]:
        return tuple(AccuracyCheck.from_dict(a) for a in _rows(self._accuracy))

    @property
    def resources(self) -> Resources:
        return Resources.from_dict(self._resources)

    @cached_property
    def tables(self) -> Tables:
        return Tables(self._tables)

    @property
    def session(self) -> Session:
        """The backend's session (an empty one where there is no backend)."""
        return self.backend.session if self.backend else Session()
