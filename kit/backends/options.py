"""Each backend's options as a typed record (as optimum-benchmark's per-backend configs), checked
where it is made: an unknown key or a bad value raises an error naming it and what is allowed.

A run's JSON (its parameters, its backend section, a search's probes and plan, the decision
cache) keeps the options as the plain dict it always held: `from_dict` reads that dict, `to_dict`
writes it back exactly (a key not given stays out). Each backend names its record
(`Backend.options_type`); `kit.backends.options_for(backend, d)` reads a dict for a backend.

>>> TorchOptions.from_dict({"cuda_graph": True, "clients": 2}).to_dict()
{'cuda_graph': True, 'clients': 2}
>>> TorchOptions.from_dict({"cuda_grap": True})
Traceback (most recent call last):
...
kit.errors.UnknownValueError: unknown torch option 'cuda_grap'; known: clients, compile, compile_mode, cuda_graph, device_id
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from kit.errors import InvalidParameter, UnknownValueError

Opts = TypeVar("Opts", bound="BackendOptions")

#: ONNX Runtime's graph optimisation levels (the option `graph_optimization`)
GRAPH_OPTIMIZATION = (
    "ORT_ENABLE_ALL",
    "ORT_ENABLE_EXTENDED",
    "ORT_ENABLE_BASIC",
    "ORT_DISABLE_ALL",
)
#: ONNX Runtime's int8 methods (the option `quantization`; int8 only)
QUANTIZATION = ("static-qdq", "dynamic")
#: OpenVINO's performance hints (the option `hint`, any case)
HINTS = ("LATENCY", "THROUGHPUT")
#: the option `nncf` (any case): NNCF's defaults, or ModelType.TRANSFORMER
NNCF_PRESETS = ("default", "transformer")
CLIENTS = "an integer >= 1 (concurrent clients of one session)"
DEVICE_ID = "a CUDA ordinal >= 0 (after CUDA_VISIBLE_DEVICES)"


def _flag(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise InvalidParameter(name, value, "True or False")


def _count(name: str, value: object, least: int, allowed: str) -> None:
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < least
    ):
        raise InvalidParameter(name, value, allowed)


def _mapping(name: str, value: object) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidParameter(name, value, "a dict")


@dataclass(frozen=True, kw_only=True)
class BackendOptions:
    """A backend's options; a field left None was not given (the backend's default applies), and
    stays out of `to_dict`. The base takes no option (a backend that declares none)."""

    backend: ClassVar[str] = "backend"
    #: the order the keys were given in (a dict read by `from_dict`), kept by `to_dict`
    given: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def names(cls) -> list[str]:
        """The option keys this backend takes."""
        return [f.name for f in fields(cls) if f.name != "given"]

    @classmethod
    def from_dict(cls: type[Opts], d: Mapping[str, Any] | None) -> Opts:
        """The record from a run's options dict; UnknownValueError for a key this backend lacks."""
        known = cls.names()
        for key in d or {}:
            if key not in known:
                raise UnknownValueError(f"{cls.backend} option", key, known)
        return cls(**dict(d or {}), given=tuple(d or {}))

    @classmethod
    def of(cls: type[Opts], value: BackendOptions | Mapping[str, Any] | None) -> Opts:
        """`value` as this record: itself, or read from a dict."""
        if isinstance(value, cls):
            return value
        if isinstance(value, BackendOptions):
            return cls.from_dict(value.to_dict())
        return cls.from_dict(value)

    def to_dict(self) -> dict[str, Any]:
        """The options dict a run writes: the options given (None too), in the order given."""
        names = [*self.given, *(n for n in self.names() if n not in self.given)]
        return {
            n: getattr(self, n) for n in names if n in self.given or getattr(self, n) is not None
        }

    def label_parts(self) -> list[str]:
        """What a search's probe label says of these options (kit.search.candidates)."""
        return []

    @property
    def compiles(self) -> bool:
        """torch.compile is asked for (minutes to load; a search keeps such a session)."""
        return False

    @property
    def static_int8(self) -> bool:
        """Static int8 is asked for (its calibration needs memory: kit.search.planning)."""
        return False


@dataclass(frozen=True, kw_only=True)
class GpuOptions(BackendOptions):
    """What every in-process GPU backend takes: the CUDA ordinal and the concurrent clients."""

    clients: int | None = None  # clients of one session (a GPU search overlaps copies with compute)
    device_id: int | None = None  # the CUDA ordinal (default 0)

    def __post_init__(self) -> None:
        _count("clients", self.clients, 1, CLIENTS)
        _count("device_id", self.device_id, 0, DEVICE_ID)

    @property
    def ordinal(self) -> int:
        return self.device_id or 0

    def label_parts(self) -> list[str]:
        return [f"clients={self.clients}"] if self.clients else []


@dataclass(frozen=True, kw_only=True)
class OnnxRuntimeOptions(GpuOptions):
    """ONNX Runtime: the CUDA provider's graph, the int8 method, the graph optimisation level and
    per-provider options (overriding the kit's, by provider name)."""

    backend: ClassVar[str] = "onnxruntime"
    cuda_graph: bool | None = None
    quantization: str | None = None  # None: the graph decides
    graph_optimization: str | None = None  # None: ORT_ENABLE_ALL
    provider_options: dict[str, dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _flag("cuda_graph", self.cuda_graph)
        if self.quantization is not None and self.quantization not in QUANTIZATION:
            raise InvalidParameter(
                "quantization", self.quantization, f"one of {', '.join(QUANTIZATION)}"
            )
        if (
            self.graph_optimization is not None
            and self.graph_optimization not in GRAPH_OPTIMIZATION
        ):
            raise InvalidParameter(
                "graph_optimization",
                self.graph_optimization,
                f"one of {', '.join(GRAPH_OPTIMIZATION)}",
            )
        _mapping("provider_options", self.provider_options)

    @property
    def static_int8(self) -> bool:
        return self.quantization == "static-qdq"

    @property
    def graph_level(self) -> str:
        return self.graph_optimization or GRAPH_OPTIMIZATION[0]

    def label_parts(self) -> list[str]:
        return [
            *(["cuda-graph"] if self.cuda_graph else []),
            *super().label_parts(),
            *([self.quantization] if self.quantization else []),
            *(
                [f"graph={self.graph_optimization.removeprefix('ORT_ENABLE_')}"]
                if self.graph_optimization
                else []
            ),
        ]


@dataclass(frozen=True, kw_only=True)
class TorchOptions(GpuOptions):
    """PyTorch: torch.compile (inductor) and its mode, the host-to-host call in one CUDA graph."""

    backend: ClassVar[str] = "torch"
    compile: bool | None = None
    compile_mode: str | None = None  # torch.compile's mode (None: its default)
    cuda_graph: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _flag("compile", self.compile)
        _flag("cuda_graph", self.cuda_graph)
        if self.compile_mode is not None and not isinstance(self.compile_mode, str):
            raise InvalidParameter(
                "compile_mode", self.compile_mode, "a torch.compile mode (a string)"
            )
        if self.cuda_graph and self.compile:
            raise InvalidParameter(
                "cuda_graph",
                True,
                "not with compile (torch.compile's reduce-overhead mode "
                "captures its own CUDA graphs)",
            )

    @property
    def compiles(self) -> bool:
        return bool(self.compile)

    def label_parts(self) -> list[str]:
        compiled = (
            ["compile" + (f"={self.compile_mode}" if self.compile_mode else "")]
            if self.compile
            else []
        )
        return [*compiled, *(["cuda-graph"] if self.cuda_graph else []), *super().label_parts()]


@dataclass(frozen=True, kw_only=True)
class TensorRtOptions(GpuOptions):
    """TensorRT's own API: the CUDA ordinal and the clients."""

    backend: ClassVar[str] = "tensorrt"


@dataclass(frozen=True, kw_only=True)
class OpenVinoOptions(BackendOptions):
    """OpenVINO: the performance hint and NNCF's int8 preset."""

    backend: ClassVar[str] = "openvino"
    hint: str | None = None  # None: LATENCY
    nncf: str | None = None  # None: default

    def __post_init__(self) -> None:
        if self.hint is not None and str(self.hint).upper() not in HINTS:
            raise InvalidParameter("hint", str(self.hint).upper(), f"one of {', '.join(HINTS)}")
        if self.nncf is not None and str(self.nncf).lower() not in NNCF_PRESETS:
            raise InvalidParameter(
                "nncf",
                str(self.nncf).lower(),
                "default (NNCF's own settings) or transformer (nncf.ModelType.TRANSFORMER)",
            )

    @property
    def hint_mode(self) -> str:
        return str(self.hint or HINTS[0]).upper()

    @property
    def nncf_preset(self) -> str:
        return str(self.nncf or NNCF_PRESETS[0]).lower()

    def label_parts(self) -> list[str]:
        return [
            *([f"nncf={self.nncf}"] if self.nncf else []),
            *([f"hint={self.hint}"] if self.hint else []),
        ]


@dataclass(frozen=True, kw_only=True)
class IpuOptions(BackendOptions):
    """PopRT on the IPU: ByteMLPerf's settings (on by default), the pack check, options over the
    published converter and compiler options, and where the compiled PopEF files are kept."""

    backend: ClassVar[str] = "ipu"
    bytemlperf_settings: bool | None = None  # None: True
    pack_check: bool | None = None  # None: True
    converter_options: dict[str, Any] | None = None
    compiler_options: dict[str, Any] | None = None
    cache_dir: str | Path | None = None  # None: the kit's cache, popef/

    def __post_init__(self) -> None:
        _flag("bytemlperf_settings", self.bytemlperf_settings)
        _flag("pack_check", self.pack_check)
        _mapping("converter_options", self.converter_options)
        _mapping("compiler_options", self.compiler_options)
        if self.cache_dir is not None and not isinstance(self.cache_dir, str | Path):
            raise InvalidParameter("cache_dir", self.cache_dir, "a folder (a string or a Path)")

    @property
    def published_settings(self) -> bool:
        return self.bytemlperf_settings is not False

    @property
    def check_packing(self) -> bool:
        return self.pack_check is not False
