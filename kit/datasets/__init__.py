"""Published datasets (opt-in, read from data/datasets/NAME) and the accuracy check.

Floor 4 of kit/ (docs/architecture.md): imports kit.models and every floor below it.

>>> from kit.datasets import DATASETS
>>> sorted(DATASETS.names())[:3]
['cail2019', 'cifar100', 'criteo']
"""

from __future__ import annotations

from kit.datasets.accuracy import MODEL_EVALS, align_inputs, build_dataset, evaluate_accuracy
from kit.datasets.base import Batch, Dataset
from kit.datasets.registry import DATASETS

__all__ = [
    "DATASETS",
    "MODEL_EVALS",
    "Batch",
    "Dataset",
    "align_inputs",
    "build_dataset",
    "evaluate_accuracy",
    "get_dataset",
]


def get_dataset(name: str, root=None, **options) -> Dataset:
    """An adapter by name (squad, imagenet, criteo, cail2019, cifar100, fake_dataset)."""
    return DATASETS.get(name)(root, **options)
