"""Each section of a result as a typed, frozen record: what a run holds and writes, and what
publishing reads, by attribute.

A run builds its sections as these records (`RunResult.model`, `.backend`, `.environment`,
`.resources`; kit.results.windows: `.measurements`, `.numerics`, `.accuracy`) and the JSON is
written from them (`to_dict`); a reader gets them back from the JSON (`from_dict`, after
`kit.results.schema.upgrade`), so a key a run did not write is a default here, once, not an
`or {}` in every reader. A key a record does not name stays in its `more` and is written back as
it was (`kit.results.values.Record`): nothing a run measured is dropped. Nothing here recomputes
a figure: a record holds the figure the run stored.

>>> m = Measurement.from_dict({"batch_size": 4, "mode": "single", "threads": 1, "throughput": 9.5,
...                            "qps_bytemlperf": 10.0, "extra": {"pack_batch_size": 8}})
>>> m.measured_batch, m.bytemlperf.qps, m.latency.mean_ms
(8, None, None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kit.results.session import Session
from kit.results.tables import Tables
from kit.results.values import _READ, Json, Record, _map, _strings, _text
from kit.results.windows import AccuracyCheck, Measurement, NumericCheck

R = TypeVar("R", bound=Record)

# --- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Weights(Record):
    """Where the model's weights came from: `source` 'random' or where real ones were read."""

    source: str | None = None
    label: str = field(default="", metadata={_READ: _text})


@dataclass(frozen=True, kw_only=True)
class ModelInfo(Record):
    """The model a run measured (`kit.models` `describe()`); its inputs, outputs and export
    details stay in `more`."""

    name: str | None = None
    onnx_path: str | None = None
    weights: Weights = field(default_factory=Weights, metadata={_READ: Weights.from_dict})
    flops_per_sample: float | None = None
    params: int | None = None
    opset: int | None = None
    flops_shared_per_call: float | None = None
    onnx_file: str | None = None

    @property
    def random_weights(self) -> bool:
        return self.weights.source == "random"


# --- the backend --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Peak(Record):
    """The device's nominal peak at the run's precision (`gflops`), and how it was found."""

    gflops: float | None = None
    method: str = field(default="", metadata={_READ: _text})


@dataclass(frozen=True, kw_only=True)
class DeviceInfo(Record):
    """The device a backend ran on: its name, kind (cpu, gpu, ipu) and nominal peak."""

    name: str | None = None
    kind: str | None = None
    peak: Peak = field(default_factory=Peak, metadata={_READ: Peak.from_dict})


@dataclass(frozen=True, kw_only=True)
class BackendInfo(Record):
    """What ran the model: the backend, precision and device, its options, device and session."""

    name: str | None = None
    precision: str | None = None
    device: str | None = None
    options: Json = field(default_factory=dict, metadata={_READ: _map})
    device_info: DeviceInfo = field(
        default_factory=DeviceInfo, metadata={_READ: DeviceInfo.from_dict}
    )
    session: Session = field(default_factory=Session, metadata={_READ: Session.from_dict})

    @property
    def raw(self) -> dict[str, Any]:
        """As written, for kit.hardware.parts.MeasuredOn.from_backend."""
        return self.to_dict()

    @property
    def compiled(self) -> bool:
        """Run compiled: the compile option, unless the session fell back to eager (a compile that
        failed, e.g. past dynamo's recompile limit, records why as its `compile_fallback`)."""
        return bool(self.options.get("compile")) and not self.session.compile_fallback

    def at(self, measurement: Measurement | None) -> BackendInfo:
        """What ran `measurement`: on a kind that searches each batch its own plan (backend,
        precision, device, options), and the session it timed where it recorded one; this block
        (the headline's) for whatever it did not record."""
        if measurement is None:
            return self
        plan = measurement.searched_plan or {}
        return replace(
            self,
            name=plan.get("backend", self.name),
            precision=plan.get("precision", self.precision),
            device=plan.get("device", self.device),
            options=plan.get("options", self.options),
            session=measurement.session if measurement.session is not None else self.session,
        )


# --- the environment ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Cpu(Record):
    model: str | None = None
    cores: int | None = None


@dataclass(frozen=True, kw_only=True)
class KitSource(Record):
    """The kit that wrote a result: its git commit (None when installed) and local changes."""

    commit: str | None = None
    dirty: bool = False
    diff_sha256: str | None = None
    version: str | None = None


def _kit_source(value: object) -> KitSource | None:
    """None: a result from before the kit's commit was recorded."""
    return KitSource.from_dict(value) if isinstance(value, Mapping) and value else None


@dataclass(frozen=True, kw_only=True)
class Environment(Record):
    """Where a result was measured (`kit.hardware.environment.capture()`)."""

    host: str | None = None
    os: str | None = None
    python: str | None = None
    cpu: Cpu = field(default_factory=Cpu, metadata={_READ: Cpu.from_dict})
    # None: not recorded
    gpus: tuple[str, ...] | None = field(default=None, metadata={_READ: _strings})
    ipu_present: bool | None = None
    packages: Json = field(default_factory=dict, metadata={_READ: _map})
    threads: Json = field(default_factory=dict, metadata={_READ: _map})
    kit: KitSource | None = field(default=None, metadata={_READ: _kit_source})
    distributions: Json = field(default_factory=dict, metadata={_READ: _map})
    job: Json = field(default_factory=dict, metadata={_READ: _map})  # the batch job that ran it
    allocator: str = field(default="", metadata={_READ: _text})

    @property
    def rerun(self) -> str | None:
        """The command that re-runs a batch job's result."""
        command: str | None = self.job.get("rerun")
        return command

    def fact(self, key: str) -> object:
        """One of the facts two runs' environments are compared by (host, os, python, gpus,
        ipu_present)."""
        gpus = None if self.gpus is None else list(self.gpus)
        return {
            "host": self.host,
            "os": self.os,
            "python": self.python,
            "gpus": gpus,
            "ipu_present": self.ipu_present,
        }[key]


# --- a result's sections together ---------------------------------------------------------------


def _peak_bytes(value: object) -> int | None:
    if isinstance(value, float) and math.isfinite(value):
        value = round(value)  # bytes: a count, whole even where JSON wrote it as a float
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: what kit.measure.memory.resources() writes in `method` where a warm kernel ran the job
WARM_KERNEL = "in a kernel kept warm across the batch's jobs"


@dataclass(frozen=True, kw_only=True)
class Resources(Record):
    """What the run's process used at its peak (`kit.measure.memory.resources()`)."""

    peak_rss_bytes: int | None = field(default=None, metadata={_READ: _peak_bytes})
    method: str = field(default="", metadata={_READ: _text})

    @property
    def in_warm_kernel(self) -> bool:
        """Measured in the batch's warm kernel: the peak counts from what earlier jobs left."""
        return WARM_KERNEL in self.method


def _written(record: R | None) -> R | None:
    """`record`, or None where it holds nothing (a section the run did not write: it failed
    first)."""
    return record if record is not None and record.to_dict() else None


@dataclass(frozen=True, kw_only=True)
class Sections:
    """Every section of one result as records (`RunResult.sections`); `model` and `backend` are
    None where the run wrote none (it failed first)."""

    model: ModelInfo | None = None
    backend: BackendInfo | None = None
    environment: Environment = field(default_factory=Environment)
    measurements: tuple[Measurement, ...] = ()
    numerics: tuple[NumericCheck, ...] = ()
    accuracy: tuple[AccuracyCheck, ...] = ()
    resources: Resources = field(default_factory=Resources)
    tables: Tables = field(default_factory=Tables)

    @classmethod
    def of(
        cls,
        *,
        model: ModelInfo | None,
        backend: BackendInfo | None,
        environment: Environment,
        measurements: Sequence[Measurement],
        numerics: Sequence[NumericCheck],
        accuracy: Sequence[AccuracyCheck],
        resources: Resources,
        tables: Tables,
    ) -> Sections:
        """A result's sections (its records, and the tables it wrote)."""
        return cls(
            model=_written(model),
            backend=_written(backend),
            environment=environment,
            measurements=tuple(measurements),
            numerics=tuple(numerics),
            accuracy=tuple(accuracy),
            resources=resources,
            tables=tables,
        )

    @property
    def session(self) -> Session:
        """The backend's session (an empty one where there is no backend)."""
        return self.backend.session if self.backend else Session()
