"""CAIL2019-SCM (similar case matching) for the RoFormer row, with ByteMLPerf's pairwise rule.

`test.json`: one JSON object per line, {"A": text, "B": text, "C": text, "label": "B" or "C"}
(the label names the case more similar to A). Each triple becomes two rows, (A, more similar)
then (A, other), encoded as `[CLS] A [SEP] X [SEP]` with the model's vocabulary, 1024 tokens,
longest-first truncation; ByteMLPerf's model takes token and segment ids as float32. A triple is
right when the first row's similarity score is higher (`kit.metrics.cail2019_correct`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, index_batches, pad_rows
from kit.datasets.text import pad_id, private_copy
from kit.errors import InvalidParameter
from kit.metrics import cail2019_correct, fraction

FILE = "test.json"


def read_triples(path: Path) -> list[tuple[str, str, str]]:
    """(A, more similar, less similar) per line."""
    triples = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        label = str(item.get("label", "")).strip().upper()
        if label not in ("B", "C") or not all(k in item for k in "ABC"):
            raise InvalidParameter(f"{Path(path).name} line {n}", line[:60],
                                   "a JSON object with A, B, C and label 'B' or 'C'")
        first, second = (item["B"], item["C"]) if label == "B" else (item["C"], item["B"])
        triples.append((item["A"], first, second))
    return triples


class Cail2019(Dataset):
    name = "cail2019"
    metric = "Top-1"
    roles = {"token": "input_token:0", "segment": "input_segment:0"}
    layout = f"{FILE} (CAIL2019-SCM JSON lines) and the model's vocab.txt/tokenizer directory"

    def __init__(self, root=None, input_names=None, *, tokenizer=None, tokenizer_dir=None,
                 max_seq_length: int = 1024, dtype: str = "float32"):
        super().__init__(root, input_names)
        self._tokenizer, self.tokenizer_dir = tokenizer, tokenizer_dir
        self.max_seq_length, self.dtype = max_seq_length, dtype
        self._arrays: dict[str, np.ndarray] | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        return None if (Path(root) / FILE).exists() else f"no {FILE}"

    def _tokenizer_copy(self):
        tok = private_copy(self._tokenizer, self.tokenizer_dir, "the RoFormer vocabulary directory")
        tok.enable_truncation(self.max_seq_length, strategy="longest_first")
        tok.enable_padding(length=self.max_seq_length, pad_id=pad_id(tok))
        return tok

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """token/segment ids, two rows per triple: [2n, max_seq_length]."""
        if self._arrays is None:
            self.require()
            tok = self._tokenizer_copy()
            pairs = [(a, x) for a, b, c in read_triples(self.root / FILE) for x in (b, c)]
            encs = tok.encode_batch(pairs)
            self._arrays = {"token": np.asarray([e.ids for e in encs], dtype=self.dtype),
                            "segment": np.asarray([e.type_ids for e in encs], dtype=self.dtype)}
        return self._arrays

    def __len__(self) -> int:
        return len(self.arrays["token"]) // 2

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        if batch_size % 2:
            raise InvalidParameter("batch_size", batch_size, "an even number (rows come in pairs)")
        arrays = self.arrays
        for idx in index_batches(len(self), batch_size // 2, data_percent):
            rows = np.stack([2 * idx, 2 * idx + 1], axis=1).ravel()
            inputs = {k: pad_rows(a[rows], batch_size) for k, a in arrays.items()}
            yield Batch(self.named(inputs), None, len(rows), batch_size)

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        correct = np.concatenate([cail2019_correct(out[0][: b.valid]) for b, out in results])
        return {"metric": self.metric, "value": fraction(correct), "unit": "fraction (0-1)",
                "samples": int(correct.size), "correct": int(correct.sum())}
