"""SQuAD v1.1 dev set (`dev-v1.1.json`) for the BERT-family question-answering rows.

Features follow the BERT reference: question cut to 64 tokens, context windows of a 384-token
sequence starting every 128 tokens, the model's own tokenizer and special tokens. Answers come
back as text through the tokens' character offsets; the n-best search (20 starts x 20 ends,
answers up to 30 tokens, start token in its best-context window) matches BERT's write_predictions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, index_batches, pad_rows
from kit.datasets.text import pad_id, private_copy
from kit.errors import InvalidParameter
from kit.metrics import squad_scores

FILE = "dev-v1.1.json"


@dataclass
class Example:
    qid: str
    question: str
    context: str
    answers: list[str]


@dataclass
class Feature:
    example: int
    # token position -> (char start, char end, is this window the token's best context)
    context: dict[int, tuple[int, int, bool]]


def read_examples(path: Path) -> list[Example]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "data" not in data:
        raise InvalidParameter("SQuAD file", str(path), "a SQuAD v1.1 JSON with a 'data' list")
    return [
        Example(qa["id"], qa["question"], para["context"], [a["text"] for a in qa["answers"]])
        for article in data["data"] for para in article["paragraphs"] for qa in para["qas"]
    ]


def _max_context(spans: list[tuple[int, int]], doc_index: int) -> int:
    """Window whose span holds `doc_index` with the most context on its shorter side (BERT)."""
    best, best_score = -1, -1.0
    for w, (start, end) in enumerate(spans):
        if start <= doc_index <= end:
            score = min(doc_index - start, end - doc_index) + 0.01 * (end - start + 1)
            if score > best_score:
                best, best_score = w, score
    return best


class Squad(Dataset):
    name = "squad"
    metric = "F1 Score"
    roles = {"ids": "input_ids.1", "mask": "attention_mask.1", "segment": "token_type_ids.1"}
    layout = f"{FILE} (SQuAD v1.1 dev JSON) and a tokenizer directory for the model"

    def __init__(self, root=None, input_names=None, *, tokenizer=None, tokenizer_dir=None,
                 max_seq_length: int = 384, doc_stride: int = 128, max_query_length: int = 64,
                 n_best: int = 20, max_answer_length: int = 30, dtype: str = "int64",
                 mask_padding_logits: bool = True):
        super().__init__(root, input_names)
        self._tokenizer, self.tokenizer_dir = tokenizer, tokenizer_dir
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        self.max_query_length, self.n_best = max_query_length, n_best
        self.max_answer_length, self.dtype = max_answer_length, dtype
        self.mask_padding_logits = mask_padding_logits
        self._built: tuple | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        return None if (Path(root) / FILE).exists() else f"no {FILE}"

    def _tokenizer_copy(self):
        return private_copy(self._tokenizer, self.tokenizer_dir, "the model's tokenizer directory")

    def _build(self) -> tuple[list[Example], list[Feature], dict[str, np.ndarray]]:
        if self._built is None:
            self.require()
            examples = read_examples(self.root / FILE)
            tok = self._tokenizer_copy()
            tok.enable_padding(length=self.max_seq_length, pad_id=pad_id(tok))
            specials = tok.post_processor.num_special_tokens_to_add(True) if tok.post_processor else 0
            features, ids, mask, seg = [], [], [], []
            for i, ex in enumerate(examples):
                for enc, ctx in self._windows(tok, ex, specials):
                    features.append(Feature(i, ctx))
                    ids.append(enc.ids)
                    mask.append(enc.attention_mask)
                    seg.append(enc.type_ids)
            arrays = {k: np.asarray(v, dtype=self.dtype) for k, v in
                      (("ids", ids), ("mask", mask), ("segment", seg))}
            self._built = (examples, features, arrays)
        return self._built

    def _windows(self, tok, ex: Example, specials: int):
        question = ex.question
        q = tok.encode(question, add_special_tokens=False)
        q_len = sum(q.attention_mask)  # padding is on: count real tokens
        if q_len > self.max_query_length:
            question = question[: q.offsets[self.max_query_length - 1][1]]
            q_len = self.max_query_length
        doc_len = self.max_seq_length - q_len - specials
        if doc_len <= 0:
            raise InvalidParameter("max_seq_length", self.max_seq_length, "room for question and context")
        tok.enable_truncation(self.max_seq_length, stride=max(0, doc_len - self.doc_stride),
                              strategy="only_second")
        first = tok.encode(question, ex.context)
        windows = [first, *first.overflowing]
        positions = [[p for p, s in enumerate(w.sequence_ids) if s == 1] for w in windows]
        keys = sorted({w.offsets[p] for w, ps in zip(windows, positions, strict=True) for p in ps})
        doc_index = {k: i for i, k in enumerate(keys)}
        spans = [(doc_index[w.offsets[ps[0]]], doc_index[w.offsets[ps[-1]]]) if ps else (-1, -2)
                 for w, ps in zip(windows, positions, strict=True)]
        for n, (w, ps) in enumerate(zip(windows, positions, strict=True)):
            ctx = {p: (*w.offsets[p], _max_context(spans, doc_index[w.offsets[p]]) == n) for p in ps}
            yield w, ctx

    @property
    def examples(self) -> list[Example]:
        return self._build()[0]

    @property
    def features(self) -> list[Feature]:
        return self._build()[1]

    def __len__(self) -> int:
        return len(self.features)

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        _, features, arrays = self._build()
        for idx in index_batches(len(features), batch_size, data_percent):
            inputs = {role: pad_rows(a[idx], batch_size) for role, a in arrays.items()}
            yield Batch(self.named(inputs), None, len(idx), batch_size, {"features": idx})

    def _logits(self, outputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if len(outputs) >= 2 and outputs[0].shape == outputs[1].shape:
            return outputs[0], outputs[1]
        if outputs[0].shape[-1] == 2:  # TF BERT: one [batch, seq, 2] logits tensor
            return outputs[0][..., 0], outputs[0][..., 1]
        raise InvalidParameter("SQuAD outputs", [o.shape for o in outputs],
                               "start and end logits [batch, seq], or one [batch, seq, 2]")

    def best_answer(self, feature: Feature, start: np.ndarray, end: np.ndarray) -> tuple[float, str] | None:
        """Best (score, text) of one window, or None when no span is valid."""
        context = self.examples[feature.example].context
        best = None
        starts = np.argsort(-start, kind="stable")[: self.n_best]
        ends = np.argsort(-end, kind="stable")[: self.n_best]
        for s in starts:
            s_info = feature.context.get(int(s))
            if s_info is None or not s_info[2]:
                continue
            for e in ends:
                e_info = feature.context.get(int(e))
                if e_info is None or e < s or e - s + 1 > self.max_answer_length:
                    continue
                score = float(start[s] + end[e])
                if best is None or score > best[0]:
                    best = (score, context[s_info[0]: e_info[1]])
        return best

    def predictions(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> tuple[dict, int]:
        """{question id: answer text} over the evaluated features, and how many features."""
        examples, features, arrays = self._build()
        best: dict[int, tuple[float, str]] = {}
        count = 0
        for batch, outputs in results:
            start, end = self._logits(outputs)
            for row, f in enumerate(batch.meta["features"][: batch.valid]):
                s, e = start[row].astype(np.float64), end[row].astype(np.float64)
                if self.mask_padding_logits:  # ByteMLPerf zeroes logits at padding first
                    pad = arrays["mask"][f] == 0
                    s, e = np.where(pad, 0.0, s), np.where(pad, 0.0, e)
                feature = features[f]
                cand = self.best_answer(feature, s, e)
                best.setdefault(feature.example, (-np.inf, ""))
                if cand is not None and cand[0] > best[feature.example][0]:
                    best[feature.example] = cand
                count += 1
        return {examples[i].qid: text for i, (_, text) in best.items()}, count

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        predictions, count = self.predictions(results)
        golds = {ex.qid: ex.answers for ex in self.examples if ex.qid in predictions}
        bytemlperf = squad_scores(golds, predictions, denominator=count)
        official = squad_scores(golds, predictions)
        return {
            "metric": self.metric, "value": bytemlperf["f1"], "unit": "% (0-100)",
            "exact_match": bytemlperf["exact_match"], "samples": count,
            "questions": len(golds), "f1_official": official["f1"],
            "exact_match_official": official["exact_match"],
            "rule": "ByteMLPerf: sums over questions divided by evaluated features; "
                    "*_official divide by questions",
        }
