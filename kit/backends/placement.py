"""What runs where: a backend at a precision on a device, with its threads and its options (the
backend's typed record). The search's candidates, probes and plan, the published-precision
mapping's choice and a study's config each name one (`placement`); it is the one place that says
a configuration's label, the model_benchmark parameters that run it and its BackendConfig.

>>> p = Placement.of("torch", "fp16", "cuda", {"cuda_graph": True, "clients": 2})
>>> p.label
'torch fp16 cuda-graph clients=2 (cuda)'
>>> p.plan()
{'backend': 'torch', 'precision': 'fp16', 'device': 'cuda', 'options': {'cuda_graph': True, 'clients': 2}, \
'threads': None}
"""  # noqa: E501

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any

from kit.backends.base import BackendConfig
from kit.backends.options import BackendOptions
from kit.backends.registry import options_for


@dataclass(frozen=True)
class Placement:
    """Backend, precision, device, threads (None: the backend's default) and the backend's options,
    checked against the backend's record when made."""

    backend: str
    precision: str
    device: str = "cpu"
    _: KW_ONLY
    threads: int | None = None
    options: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", options_for(self.backend, self.options))

    @classmethod
    def of(
        cls,
        backend: str,
        precision: str,
        device: str = "cpu",
        options: BackendOptions | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> Placement:
        """The record from the plain fields a parameter set or a JSON holds (options as a dict)."""
        return cls(
            backend, precision, device, threads=threads, options=options_for(backend, options)
        )

    @classmethod
    def from_plan(cls, d: Mapping[str, Any]) -> Placement:
        """The record from model_benchmark parameters (`plan()`'s dict)."""
        return cls.of(
            d["backend"], d["precision"], d.get("device", "cpu"), d.get("options"), d.get("threads")
        )

    @property
    def builds_engine(self) -> bool:
        """Loading it builds a TensorRT engine (TensorRT's own API, or ONNX Runtime's TensorRT
        provider): tens of seconds to minutes on a GPU the first time, read from the engine cache
        after."""
        return self.backend == "tensorrt" or self.device == "tensorrt"

    @property
    def label(self) -> str:
        """How a search names it: 'onnxruntime int8 dynamic threads=3 (cpu)'."""
        extra = [
            *self.options.label_parts(),
            *([f"threads={self.threads}"] if self.threads else []),
        ]
        return " ".join([self.backend, self.precision, *extra]) + f" ({self.device})"

    def plan(self) -> dict[str, Any]:
        """The model_benchmark parameters that run it."""
        return {
            "backend": self.backend,
            "precision": self.precision,
            "device": self.device,
            "options": self.options.to_dict(),
            "threads": self.threads,
        }

    def backend_config(self, kind: str = "") -> BackendConfig:
        """How the backend loads it (`kind`: the hardware kind the batch resolved)."""
        return BackendConfig(
            self.precision, self.device, self.threads, self.options.to_dict(), kind=kind
        )


#: The keys a placement's fields have in a flat JSON record (`plan()`'s, in its order).
PLAN_KEYS = ("backend", "precision", "device", "options", "threads")


def flat_dict(record: Any) -> dict[str, Any]:
    """A dataclass `record` holding a `placement` as the flat JSON the search's files hold: the
    placement's five fields where the placement stands, the record's other fields (copies)
    around."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        out.update(value.plan() if f.name == "placement" else {f.name: copy.deepcopy(value)})
    return out


def unflat_dict(d: Mapping[str, Any]) -> dict[str, Any]:
    """A flat record's dict (`flat_dict`'s) with its five placement fields as one `placement`."""
    return {
        **{k: v for k, v in d.items() if k not in PLAN_KEYS},
        "placement": Placement.from_plan(d),
    }
