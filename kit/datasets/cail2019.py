"""CAIL2019-SCM (similar case matching) for the RoFormer row, as ByteMLPerf's `open_cail2019`.

Inputs, in order of preference, from the dataset folder:
- ByteMLPerf's own features `batch_token_ids.npy`, `batch_segment_ids.npy` (and `label.npy`),
  as its `pre_process_data.py` wrote them: used as they are;
- else `test.json` (one JSON object per line, {"A", "B", "C", "label": "B" or "C"}) encoded as
  that script does: two rows per triple, (A, more similar) then (A, other), each
  `[CLS] A [SEP] X [SEP]` from bert4keras' tokeniser with jieba words and `vocab.txt` (in the
  dataset folder or the model's weights folder), at most 1024 tokens
  (`kit.datasets.bert4keras_text`).
Rows are zero-padded to 1024 and fed as float32, in full batches of an even number of rows.
Score (ByteMLPerf's test_accuracy): sum of `out[0::2] > out[1::2]` over the batch's first output
divided by the number of pairs, rounded to 5 decimals. The rule compares one similarity score per
row; a model with several scores per row makes it count every column, so such a model is
"not comparable" rather than scored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, NotComparable, bytemlperf_batches
from kit.datasets.bert4keras_text import Bert4kerasTokenizer
from kit.errors import InvalidParameter, KitError, MissingResource

FILE = "test.json"
FEATURES = ("batch_token_ids.npy", "batch_segment_ids.npy")
VOCAB = "vocab.txt"


def read_triples(path: Path) -> list[tuple[str, str, str]]:
    """(A, more similar, less similar) per line."""
    triples = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidParameter(
                f"{path} line {n}", line[:60], f"a JSON object ({exc.msg})"
            ) from exc
        label = str(item.get("label", "")).strip().upper() if isinstance(item, dict) else ""
        if label not in ("B", "C") or not all(k in item for k in "ABC"):
            raise InvalidParameter(
                f"{path} line {n}", line[:60], "a JSON object with A, B, C and label 'B' or 'C'"
            )
        first, second = (item["B"], item["C"]) if label == "B" else (item["C"], item["B"])
        triples.append((item["A"], first, second))
    return triples


def pad_rows_to(rows: list, length: int, dtype: str) -> np.ndarray:
    """Zero-pad (ByteMLPerf: np.pad 'constant') each id list to `length`."""
    out = np.zeros((len(rows), length), dtype=dtype)
    for i, row in enumerate(rows):
        row = np.asarray(row).ravel()
        if len(row) > length:
            raise InvalidParameter(f"row {i}", f"{len(row)} tokens", f"at most {length}")
        out[i, : len(row)] = row
    return out


def pair_correct(scores: np.ndarray) -> tuple[int, int]:
    """(good, pairs) by ByteMLPerf's rule on one batch's output with one score per row."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim > 1 and int(np.prod(s.shape[1:])) != 1:
        raise NotComparable(
            f"CAIL2019 scoring: the model gives {int(np.prod(s.shape[1:]))} scores per row; "
            "ByteMLPerf compares rows elementwise (one similarity score per row), which would "
            "count every column"
        )
    s = s.reshape(len(s))
    if len(s) % 2:
        raise InvalidParameter(
            "CAIL2019 scores", f"{len(s)} rows", "an even number of rows (pairs)"
        )
    return int((s[0::2] > s[1::2]).sum()), len(s) // 2


class Cail2019(Dataset):
    name = "cail2019"
    metric = "Top-1"
    roles = {"token": "input_token:0", "segment": "input_segment:0"}
    layout = (
        f"{' + '.join(FEATURES)} (ByteMLPerf's features), or {FILE} (CAIL2019-SCM JSON lines) "
        f"with {VOCAB} there or in the model's weights folder"
    )

    def __init__(
        self,
        root=None,
        input_names=None,
        *,
        tokenizer_dir=None,
        tokenizer=None,
        max_seq_length: int = 1024,
        dtype: str = "float32",
    ):
        super().__init__(root, input_names)
        self.tokenizer_dir, self._tokenizer = tokenizer_dir, tokenizer
        self.max_seq_length, self.dtype = max_seq_length, dtype
        self._arrays: dict[str, np.ndarray] | None = None
        self.source = ""

    @classmethod
    def missing(cls, root: Path) -> str | None:
        root = Path(root)
        if all((root / f).exists() for f in FEATURES) or (root / FILE).exists():
            return None
        return f"no {FILE} and no {' + '.join(FEATURES)}"

    def _vocab(self) -> Path:
        for folder in (self.root, self.tokenizer_dir):
            if folder is not None and (Path(folder) / VOCAB).exists():
                return Path(folder) / VOCAB
        raise MissingResource(
            f"cail2019: no {VOCAB} in {self.root} or {self.tokenizer_dir} (the RoFormer "
            "vocabulary bert4keras tokenises with)"
        )

    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = Bert4kerasTokenizer.from_vocab_file(self._vocab())
        return self._tokenizer

    def _encode(self) -> tuple[list, list]:
        tok = self.tokenizer()
        tokens, segments = [], []
        for a, b, c in read_triples(self.root / FILE):
            for x in (b, c):
                ids, segs = tok.encode(a, x, self.max_seq_length)
                tokens.append(ids)
                segments.append(segs)
        return tokens, segments

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """token/segment ids, two rows per triple: [2n, max_seq_length]."""
        if self._arrays is None:
            self.require()
            features = self._features()
            if features is not None:
                tokens, segments = features
                self.source = f"ByteMLPerf's features ({', '.join(FEATURES)})"
            else:
                tokens, segments = self._encode()
                self.source = (
                    f"{FILE} encoded as ByteMLPerf's pre_process_data.py (bert4keras rules, jieba)"
                )
            if len(tokens) != len(segments) or len(tokens) % 2:
                raise InvalidParameter(
                    "CAIL2019 features",
                    f"{len(tokens)} token rows, {len(segments)} segment rows",
                    "as many of each, in pairs",
                )
            self._arrays = {
                "token": pad_rows_to(tokens, self.max_seq_length, self.dtype),
                "segment": pad_rows_to(segments, self.max_seq_length, self.dtype),
            }
        return self._arrays

    def _features(self) -> tuple[list, list] | None:
        """ByteMLPerf's token and segment features when they are plain arrays; None when absent or
        pickled object arrays and the text is there to encode instead. The kit never unpickles
        downloaded data (a tampered archive would run code)."""
        if not all((self.root / f).exists() for f in FEATURES):
            return None
        try:
            tokens, segments = (list(np.load(self.root / f, allow_pickle=False)) for f in FEATURES)
        except ValueError:  # object arrays: only unpickling could read them
            if (self.root / FILE).exists():
                return None
            raise KitError(
                f"{self.root}: {' + '.join(FEATURES)} are pickled object arrays, which the kit "
                f"does not load (a tampered download could run code); put {FILE} there (its text "
                f"is encoded as ByteMLPerf does), or save the features as plain integer arrays"
            ) from None
        return tokens, segments

    def __len__(self) -> int:
        return len(self.arrays["token"]) // 2

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        if isinstance(batch_size, int) and batch_size % 2:
            raise InvalidParameter("batch_size", batch_size, "an even number (rows come in pairs)")
        arrays = self.arrays
        for rows in bytemlperf_batches(2 * len(self), batch_size, data_percent):
            yield Batch(
                self.named({k: a[rows] for k, a in arrays.items()}), None, len(rows), batch_size
            )

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        good = pairs = 0
        for batch, out in results:
            g, p = pair_correct(out[0][: batch.valid])
            good, pairs = good + g, pairs + p
        return {
            "metric": self.metric,
            "value": round(good / pairs, 5),
            "unit": "fraction (0-1)",
            "samples": pairs,
            "correct": good,
            "inputs": self.source,
        }
