"""What every dataset adapter provides: batches of model inputs with labels, and a score."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit import progress
from kit.datasets.metrics import validate_data_percent
from kit.errors import InvalidParameter, KitError, MissingResource
from kit.models.spec import validate_batch_size
from kit.paths import datasets_dir

RunFn = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


class NotComparable(KitError):
    """A step of ByteMLPerf's evaluation this run cannot reproduce: the figure would not be
    comparable with the published one, so the accuracy status says so instead of a verdict."""

    def __init__(self, step: str):
        self.step = step
        super().__init__(f"not comparable: {step}")


@dataclass
class Batch:
    """Model inputs for `size` samples, the first `valid` of them scored (ByteMLPerf's batches are
    all full, so `valid == size` for every adapter here)."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    valid: int
    size: int
    meta: dict = field(default_factory=dict)

    def known_labels(self) -> np.ndarray:
        """`labels`, for a dataset that scores against them (a KitError where the batch has
        none)."""
        if self.labels is None:
            raise KitError("this batch has no labels to score against")
        return self.labels


def bytemlperf_batches(
    total: int, batch_size: int, data_percent: float, shuffle_seed: int | None = None
) -> list[np.ndarray]:
    """ByteMLPerf's batches: full batches only, the first int(data_percent% of them), over the
    indices shuffled by Python's `random.seed(shuffle_seed)` when a seed is given."""
    validate_batch_size(batch_size)
    pct = validate_data_percent(data_percent)
    order = list(range(total))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    count = int(pct / 100 * (total // batch_size))
    if count == 0:
        raise InvalidParameter(
            "batch_size/data_percent",
            (batch_size, data_percent),
            f"at least one full batch of the {total} samples (ByteMLPerf "
            f"evaluates full batches only)",
        )
    index = np.asarray(order, dtype=np.int64)
    return [index[i * batch_size : (i + 1) * batch_size] for i in range(count)]


class Dataset(ABC):
    """One published dataset read from its real files under `root`.

    `input_names` maps the adapter's roles (e.g. "ids", "mask") to the model's input names;
    the defaults are ByteMLPerf's names for the published model.
    """

    name: str = ""
    metric: str = ""
    roles: dict[str, str] = {}
    #: what must be in the folder, for messages (one line)
    layout: str = ""
    #: the inputs are made from the model's InputSpecs (`specs=`), not read from files
    generated_from_specs: bool = False
    #: the metric compares the run with a reference run (`evaluate(..., reference=)`)
    needs_reference: bool = False

    def __init__(self, root: Path | str | None = None, input_names: dict[str, str] | None = None):
        self.root = Path(root) if root is not None else datasets_dir() / self.name
        self.input_names = {**self.roles, **(input_names or {})}

    @classmethod
    def missing(cls, root: Path) -> str | None:
        """None when the files are there, else what is missing (one line)."""
        return None

    def require(self) -> None:
        problem = self.missing(self.root)
        if problem:
            raise MissingResource(
                f"{self.name}: {problem} in {self.root} (expected layout: {self.layout}; "
                f"see docs/datasets.md, or run `kit fetch-data {self.name}` on a machine with "
                "internet)"
            )

    def named(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rename role-keyed arrays to the model's input names."""
        return {self.input_names[role]: value for role, value in arrays.items()}

    @abstractmethod
    def __len__(self) -> int:
        """Number of samples (features for SQuAD, image/text rows otherwise)."""

    @abstractmethod
    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        """Model inputs for the first `data_percent` of the samples."""

    @abstractmethod
    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        """{'metric': name, 'value': ..., 'samples': n, ...extras} from batches and outputs."""

    def evaluate(self, run: RunFn, batch_size: int, data_percent: float = 100) -> dict:
        """Run every batch through `run` and score the outputs."""
        self.require()
        return self.score(
            (b, [np.asarray(o) for o in run(b.inputs)])
            for b in progress.rounds(self.batches(batch_size, data_percent), "evaluating", "batch")
        )
