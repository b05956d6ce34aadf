"""What every dataset adapter provides: batches of model inputs with labels, and a score."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit import progress
from kit.errors import MissingResource
from kit.metrics import samples_for_percent
from kit.models.spec import validate_batch_size
from kit.paths import datasets_dir

RunFn = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


@dataclass
class Batch:
    """Model inputs for `size` samples; only the first `valid` are real (the last batch is
    padded by repeating its last sample so fixed-shape sessions can run it)."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    valid: int
    size: int
    meta: dict = field(default_factory=dict)


def pad_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """Repeat the last row until `array` has `rows` rows."""
    if len(array) >= rows:
        return array
    extra = np.repeat(array[-1:], rows - len(array), axis=0)
    return np.concatenate([array, extra], axis=0)


def index_batches(total: int, batch_size: int, data_percent: float) -> Iterator[np.ndarray]:
    """Index arrays of the first `data_percent` of `total` samples, `batch_size` at a time."""
    validate_batch_size(batch_size)
    n = samples_for_percent(total, data_percent)
    for start in range(0, n, batch_size):
        yield np.arange(start, min(start + batch_size, n))


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
                f"see docs/datasets.md, or run `kit fetch-data {self.name}` on a machine with internet)"
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
        return self.score((b, [np.asarray(o) for o in run(b.inputs)])
                          for b in progress.rounds(self.batches(batch_size, data_percent), "evaluating", "batch"))
