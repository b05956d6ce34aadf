"""Criteo Kaggle `eval.csv` for the wide&deep row (Top-1 with ByteMLPerf's rounding rule).

Each line: label, 13 integer features (I1-I13), 26 hashed categorical features (C1-C26), no
header, empty cells allowed. As ByteMLPerf's preprocessing does: empty numbers become 0 and each
numeric column is min-max scaled over the whole file; the columns are taken in *name-sorted*
order (I1, I10, ..., I13, I2, ..., I9; and, sorting `C<i>_embedding`, C10, ..., C19, C1, C20, ...,
C26, C2, C3, ..., C9); each categorical string
is hashed with TensorFlow's `to_hash_bucket_fast` into 1000 buckets and fed as rows
`(column position, bucket)`, so one sample is a [26, 2] block of the [26 x batch, 2] input.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, bytemlperf_batches
from kit.datasets.metrics import criteo_correct, fraction
from kit.errors import BackendUnavailable, InvalidParameter

FILE = "eval.csv"
NUMERIC_ORDER = sorted(range(13), key=lambda i: f"I{i + 1}")
CATEGORICAL_ORDER = sorted(range(26), key=lambda i: f"C{i + 1}_embedding")
BUCKETS = 1000


def tf_hash_bucket_fast(values: list[str], buckets: int = BUCKETS) -> np.ndarray:
    """TensorFlow's string hash (FarmHash Fingerprint64 mod buckets), the one the model was fed."""
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise BackendUnavailable(
            "the Criteo adapter hashes categories with tensorflow's to_hash_bucket_fast; "
            "install tensorflow-cpu (requirements.txt) or pass hash_fn="
        ) from exc
    return tf.strings.to_hash_bucket_fast(values, buckets).numpy().astype(np.int64)


def read_eval_csv(path: Path) -> tuple[np.ndarray, np.ndarray, list[list[str]]]:
    """Labels [n], raw numeric [n, 13] (empty -> 0) and categorical strings [n][26]."""
    labels, numeric, categorical = [], [], []
    with open(path, newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            if not row:
                continue
            if len(row) != 40:
                raise InvalidParameter(
                    f"{path.name} line {n}",
                    f"{len(row)} columns",
                    "40 columns: label, I1-I13, C1-C26 (a labelled eval file)",
                )
            labels.append(float(row[0] or 0))
            numeric.append([float(v) if v else 0.0 for v in row[1:14]])
            categorical.append(row[14:40])
    return np.asarray(labels), np.asarray(numeric, dtype=np.float64).reshape(-1, 13), categorical


def normalise_numeric(raw: np.ndarray) -> np.ndarray:
    """Min-max over the file, columns in name-sorted order; a constant column becomes 0."""
    lo, hi = raw.min(axis=0), raw.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return ((raw - lo) / span)[:, NUMERIC_ORDER].astype(np.float32)


def categorical_rows(
    categorical: list[list[str]], hash_fn: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """[n, 26, 2] int64: (position in sorted column order, hash bucket)."""
    n = len(categorical)
    flat = [row[i] for row in categorical for i in CATEGORICAL_ORDER]
    buckets = np.asarray(hash_fn(flat), dtype=np.int64).reshape(n, 26)
    positions = np.broadcast_to(np.arange(26, dtype=np.int64), (n, 26))
    return np.stack([positions, buckets], axis=2)


class Criteo(Dataset):
    name = "criteo"
    metric = "Top-1"
    roles = {"categorical": "new_categorical_placeholder:0", "numeric": "new_numeric_placeholder:0"}
    layout = f"{FILE} (Criteo Kaggle, 40 comma-separated columns, no header)"

    def __init__(self, root=None, input_names=None, *, hash_fn=tf_hash_bucket_fast) -> None:
        super().__init__(root, input_names)
        self.hash_fn = hash_fn
        self._data: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        return None if (Path(root) / FILE).exists() else f"no {FILE}"

    @property
    def data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(labels [n], numeric [n, 13] float32, categorical [n, 26, 2] int64)."""
        if self._data is None:
            self.require()
            labels, raw, cats = read_eval_csv(self.root / FILE)
            self._data = (labels, normalise_numeric(raw), categorical_rows(cats, self.hash_fn))
        return self._data

    def __len__(self) -> int:
        return len(self.data[0])

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        labels, numeric, cats = self.data
        for idx in bytemlperf_batches(len(labels), batch_size, data_percent):
            inputs = {"categorical": cats[idx].reshape(-1, 2), "numeric": numeric[idx]}
            yield Batch(self.named(inputs), labels[idx], len(idx), batch_size)

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        correct = np.concatenate(
            [criteo_correct(out[0][: b.valid], b.known_labels()) for b, out in results]
        )
        return {
            "metric": self.metric,
            "value": round(fraction(correct), 5),
            "unit": "fraction (0-1)",
            "samples": int(correct.size),
            "correct": int(correct.sum()),
        }
