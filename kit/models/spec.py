"""What the rest of the kit knows about a model: its entry in the zoo and its exported ONNX file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from kit.errors import InvalidParameter, parse_member
from kit.hardware.source import file_sha256
from kit.results import ModelInfo

DTYPES = ("float32", "float16", "int64", "int32", "bool")


class Framework(StrEnum):
    """What a model was built in; the value is what an export's metadata holds.

    >>> Framework.parse("torch").torch_module, Framework.parse("onnx").torch_module
    (True, False)
    """

    TORCH = "torch"
    TENSORFLOW = "tensorflow"
    #: a user's ONNX file: no framework model behind it
    ONNX = "onnx"

    @property
    def torch_module(self) -> bool:
        """Whether the built model is a torch.nn.Module: what the torch backend, its CUDA graphs
        and torch.compile, and the plain-PyTorch peers run (every framework runs its ONNX
        export)."""
        return self is Framework.TORCH

    @classmethod
    def parse(cls, value: str) -> Framework:
        """The member `value` names; else UnknownValueError naming the allowed ones."""
        return parse_member(cls, value, "framework")


@dataclass(frozen=True)
class InputSpec:
    """One model input, described at batch size 1 as in ByteMLPerf's model zoo.

    A batched input's first dimension is multiplied by the batch size (ByteMLPerf's rule, so
    wide&deep's 26x2 categorical input becomes 26*bs x 2); an unbatched one keeps its shape.
    `low`/`high` bound generated values (token ids below the vocabulary size, for instance);
    `integer` makes a float input hold whole numbers (RoFormer's float32 token ids). For bool
    inputs `high` is the probability of True.

    >>> InputSpec("x", (1, 3, 224, 224), "float32").shape_for(8)
    (8, 3, 224, 224)
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    _: KW_ONLY
    batched: bool = True
    low: float = 0.0
    high: float = 1.0
    integer: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidParameter(f"dtype of input {self.name}", self.dtype, f"one of {DTYPES}")

    def shape_for(self, batch_size: int) -> tuple[int, ...]:
        if not self.batched:
            return self.shape
        return (self.shape[0] * batch_size, *self.shape[1:])

    def generate(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        shape = self.shape_for(batch_size)
        if self.dtype == "bool":
            return rng.random(shape) < self.high
        if self.dtype.startswith("int") or self.integer:
            ints = rng.integers(int(self.low), int(self.high), size=shape, dtype=np.int64)
            return ints.astype(self.dtype)
        return rng.uniform(self.low, self.high, size=shape).astype(self.dtype)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> InputSpec:
        return cls(**{**d, "shape": tuple(d["shape"])})


def make_inputs(
    inputs: tuple[InputSpec, ...], batch_size: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded valid inputs for every model input at `batch_size`."""
    validate_batch_size(batch_size)
    rng = np.random.default_rng(seed)
    return {spec.name: spec.generate(batch_size, rng) for spec in inputs}


def validate_batch_size(batch_size: object, maximum: int = 1 << 20) -> int:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= maximum
    ):
        raise InvalidParameter("batch_size", batch_size, f"a whole number from 1 to {maximum}")
    return batch_size


@dataclass(frozen=True)
class WeightsInfo:
    """Where a model's weights came from; accuracy figures are meaningless for random ones."""

    source: str  # "random", "local" or "hub"
    detail: str  # the seed, the directory, or the hub id

    @property
    def is_random(self) -> bool:
        return self.source == "random"

    @property
    def directory(self) -> Path | None:
        """The directory the weights were read from; None for random initialisation or a user's
        ONNX file. A hub download's detail is "<hub id> (in <directory>)" (kit.models.weights)."""
        if self.source == "hub":
            return Path(self.detail.rpartition(" (in ")[2].removesuffix(")"))
        return (
            Path(self.detail)
            if self.source == "local" and not self.detail.startswith("user ONNX file")
            else None
        )

    @property
    def label(self) -> str:
        if self.is_random:
            return f"random initialisation ({self.detail}): accuracy not meaningful"
        return f"{self.source} weights: {self.detail}"

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}

    @classmethod
    def from_dict(cls, d: dict) -> WeightsInfo:
        return cls(d["source"], d["detail"])


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """A zoo entry: how to build the model and what its inputs look like.

    `build(small, weights_dir, seed)` returns the framework model (a torch.nn.Module or a Keras
    model); `export(model, path, inputs, opset)` writes it to ONNX.
    """

    name: str
    framework: Framework
    task: str
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    build: Callable[..., Any]
    description: str = ""
    dataset: str = ""
    metric: str = ""
    hub_id: str | None = None
    reference_params: float | None = None  # parameter count of the published architecture
    small_inputs: tuple[InputSpec, ...] | None = None  # inputs of the small test variant

    def __post_init__(self) -> None:
        object.__setattr__(self, "framework", Framework.parse(self.framework))

    def inputs_for(self, small: bool) -> tuple[InputSpec, ...]:
        return self.small_inputs if small and self.small_inputs else self.inputs


@dataclass(kw_only=True)
class ExportedModel:
    """An ONNX file ready for any backend, with what is known about it."""

    name: str
    onnx_path: Path
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    weights: WeightsInfo
    flops_per_sample: float | None = None  # what each sample of a batch adds
    params: int | None = None
    opset: int | None = None
    small: bool = False
    dynamic_batch: bool = True
    verification: dict = field(default_factory=dict)
    framework: Framework = Framework.ONNX
    task: str = ""
    #: the only batch size a file without a dynamic batch axis can run at (None: any size)
    fixed_batch_size: int | None = None
    #: FLOPs a call does once whatever its batch size (inputs that are not batched)
    flops_shared_per_call: float = 0.0
    #: the precision the graph itself computes in, read from its weights (a user's fp16 file: fp16)
    precision: str = "fp32"

    def __post_init__(self) -> None:
        self.framework = Framework.parse(self.framework)

    def flops_per_call(self, batch_size: int) -> float | None:
        """FLOPs of one call at `batch_size`: what each sample adds, plus the shared work."""
        if self.flops_per_sample is None:
            return None
        return self.flops_per_sample * batch_size + self.flops_shared_per_call

    def flops_per_sample_at(self, batch_size: int) -> float | None:
        """FLOPs per sample of a call at `batch_size`: the shared work spread over its samples."""
        per_call = self.flops_per_call(batch_size)
        return None if per_call is None else per_call / batch_size

    def check_batch_size(self, batch_size: object) -> int:
        """`batch_size` if this model can run at it; a fixed-batch model at another size is an
        InvalidParameter naming both sizes (a scaled figure from a smaller call would be wrong)."""
        batch_size = validate_batch_size(batch_size)
        if self.fixed_batch_size is not None and batch_size != self.fixed_batch_size:
            batched = [
                f"{s.name} {list(s.shape_for(self.fixed_batch_size))}"
                for s in self.inputs
                if s.batched
            ]
            raise InvalidParameter(
                "batch_size",
                batch_size,
                f"{self.fixed_batch_size} only: {self.onnx_path.name} has a fixed batch dimension "
                f"({', '.join(batched)}); request batch_sizes=[{self.fixed_batch_size}] or "
                "re-export the model with a dynamic batch axis",
            )
        return batch_size

    def make_inputs(self, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
        return make_inputs(self.inputs, self.check_batch_size(batch_size), seed)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["onnx_path"] = str(self.onnx_path)
        d["inputs"] = [i.to_dict() for i in self.inputs]
        d["weights"] = self.weights.to_dict()
        return d

    def describe(self) -> dict:
        """What a result records about the model: to_dict() plus the file's name, size and
        SHA-256."""
        d = self.to_dict()
        path = Path(self.onnx_path)
        d["onnx_file"] = path.name
        d["onnx_bytes"] = path.stat().st_size if path.is_file() else None
        d["onnx_sha256"] = file_sha256(path) if path.is_file() else None
        return d

    def info(self) -> ModelInfo:
        """The result's `model` section: `describe()` as its record."""
        return ModelInfo.from_dict(self.describe())
