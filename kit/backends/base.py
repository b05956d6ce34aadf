"""The backend interface: load an exported model at a precision, run it, time it."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

import numpy as np

from kit.backends.options import BackendOptions
from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.hardware.kinds import device_kind
from kit.measure.window import BatchMeasurement, MeasureConfig, measure, timed_window
from kit.models.export import DEFAULT_OPSET
from kit.models.spec import ExportedModel
from kit.precision import RunPrecision

Opts = TypeVar("Opts", bound=BackendOptions)

PRECISIONS = tuple(RunPrecision)  # what a backend config may ask for (a backend: its `precisions`)


@dataclass(frozen=True)
class BackendConfig:
    """How to load a model: precision, device ('cpu', 'cuda', 'ipu'), threads and the backend's
    options (the plain dict a result records; `options_as` reads it as the backend's record)."""

    precision: str = "fp32"
    device: str = "cpu"
    threads: int | None = None
    options: dict = field(default_factory=dict)
    kind: str = ""  # the hardware kind (cpu, cuda, ipu); "": the kind of `device`

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", device_kind(self.device, self.kind))
        if isinstance(self.options, BackendOptions):  # kept as the plain dict a result records
            object.__setattr__(self, "options", self.options.to_dict())
        if self.precision not in PRECISIONS:
            raise InvalidParameter("precision", self.precision, f"one of {', '.join(PRECISIONS)}")
        if self.threads is not None and self.threads < 1:
            raise InvalidParameter("threads", self.threads, ">= 1 or None (all cores)")

    def to_dict(self) -> dict:
        return asdict(self)

    def options_as(self, kind: type[Opts]) -> Opts:
        """The options as the backend's record (kit.backends.options), checked.

        >>> from kit.backends.options import TorchOptions
        >>> BackendConfig(options={"compile": True}).options_as(TorchOptions).compile
        True
        """
        return kind.of(self.options)

    @property
    def device_id(self) -> int | None:
        """The CUDA ordinal the options name (None: not given, ordinal 0), read where the backend is
        not known yet: a GPU's peak and its power sensor. The backends check it (GpuOptions)."""
        return self.options.get("device_id")


class Session(ABC):
    """A model loaded on a backend for one batch size."""

    #: What actually ran: provider, dtype, emulation notes. Goes into every result.
    description: dict

    @abstractmethod
    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run once and return the outputs as numpy arrays (for numeric checks)."""

    @abstractmethod
    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """Return a zero-argument call that runs the model on `inputs` (inputs staged once)."""

    def measure(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        """Time this session; clients share it. Out-of-process backends override this."""
        call = self.bind(inputs)
        return measure([call] * cfg.clients, batch_size, cfg)

    def measure_window(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig, sampler=None
    ) -> BatchMeasurement:
        """The timed window (kit.measure.window.timed_window): warm-up outside, power over exactly
        the timed calls; clients share this session. Out-of-process backends override this."""
        return timed_window([self.bind(inputs)] * cfg.clients, batch_size, cfg, sampler)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release device resources."""


HOST_TO_HOST = (
    "host-to-host: inputs copied in, run, outputs copied out per call (as ByteMLPerf and PopRT "
    "time)"
)
DEVICE_RESIDENT = (
    "device-resident: inputs staged on the GPU once, outputs left on the GPU; not comparable "
    "with published host-to-host rows"
)


class InProcessSession(Session):
    """A session whose calls run in this process: host-to-host timing, every client with its own
    call, and a labelled device-resident figure beside it on a GPU. `clients` (from the backend
    option) overrides the timing config's client count; how the clients run is in `clients_how`."""

    on_gpu: bool = False
    clients: int | None = None
    clients_how: str = "threads sharing one session"

    def with_clients(self, cfg: MeasureConfig) -> MeasureConfig:
        return replace(cfg, clients=self.clients) if self.clients and cfg.replicas == 1 else cfg

    def labelled(self, m: BatchMeasurement, timing: str = HOST_TO_HOST) -> BatchMeasurement:
        m.extra["timing"] = timing
        if m.threads > 1:
            m.extra["clients"] = f"{m.threads} clients: {self.clients_how}"
        return m

    def bind_device_resident(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        return self.bind(inputs)

    def bind_clients(
        self, inputs: dict[str, np.ndarray], clients: int
    ) -> list[Callable[[], object]]:
        """Each client's own call (a GPU session keeps them across windows:
        kit.backends.torch_backend)."""
        return [self.bind(inputs) for _ in range(clients)]

    def measure(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        cfg = self.with_clients(cfg)
        return self.labelled(measure(self.bind_clients(inputs, cfg.clients), batch_size, cfg))

    def measure_window(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig, sampler=None
    ) -> BatchMeasurement:
        """The timed window (kit.measure.window.timed_window), every client with its own call: an
        IO binding is not safe to share between threads."""
        cfg = self.with_clients(cfg)
        return self.labelled(
            timed_window(self.bind_clients(inputs, cfg.clients), batch_size, cfg, sampler)
        )

    def measure_device_resident(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        """The device-resident figure, labelled; report it beside, never instead of, `measure`."""
        cfg = self.with_clients(cfg)
        m = measure(
            [self.bind_device_resident(inputs) for _ in range(cfg.clients)], batch_size, cfg
        )
        return self.labelled(m, DEVICE_RESIDENT if self.on_gpu else HOST_TO_HOST)


class Backend(ABC):
    """One way to execute an ONNX model (ONNX Runtime, PyTorch, PopRT on an IPU)."""

    name: str = ""
    precisions: tuple[str, ...] = ("fp32",)
    #: the record of this backend's options (kit.backends.options); the base takes none
    options_type: type[BackendOptions] = BackendOptions
    #: the ONNX opset the zoo's models are exported at for this backend (a result's model names it)
    export_opset: int = DEFAULT_OPSET

    @abstractmethod
    def availability(self) -> str | None:
        """None when usable here, else the reason it is not (one line, says what is missing)."""

    @abstractmethod
    def device_info(self, config: BackendConfig) -> dict:
        """The hardware this backend would run on: name, kind ('cpu', 'gpu', 'ipu'), peaks."""

    @abstractmethod
    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> Session:
        """Compile/load `model` for `batch_size`; raise BackendUnavailable or InvalidParameter."""

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise InvalidParameter(
                "precision", precision, f"backend {self.name} supports {', '.join(self.precisions)}"
            )


class InProcessBackend(Backend):
    """A backend whose library runs in this process on the host CPU or a local GPU."""

    module: str = ""  # the library to import
    label: str = ""  # how the unavailable message names the backend

    def availability(self) -> str | None:
        try:
            importlib.import_module(self.module)
        except ImportError:
            return f"{self.label} backend unavailable: {self.module} is not installed"
        return None

    def device_info(self, config: BackendConfig) -> dict:
        return kinds.get(config.kind).device_info(config)
