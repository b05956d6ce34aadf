"""SQuAD v1.1 dev set (`dev-v1.1.json`) for the BERT-family question-answering rows, evaluated as
ByteMLPerf's open_squad evaluates every one of them (albert, bert, roberta, deberta).

Inputs are built with BERT's reference code rules (`kit.datasets.squad_reference`): per-word
tokenisation with the model's own tokeniser, literal `[CLS]`/`[SEP]`, zero padding to 384.
RoBERTa is fed zero token type ids (ByteMLPerf feeds `np.zeros`); the others the segment ids.
Batches are full batches of features in order (the first int(data_percent% x batches)). Before the
answers are searched, every row's logits are set to 0 wherever any row of the batch is padding
(ByteMLPerf's loop over the batch's masks). F1 and exact match sum over the questions and divide
by the number of evaluated features (ByteMLPerf's `check_accuracy(..., num * batch_size)`),
rounded to 5 decimals; `*_official` divide by the questions instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, bytemlperf_batches
from kit.datasets.metrics import squad_scores
from kit.datasets.squad_reference import (
    Example,
    Feature,
    ModelVocabulary,
    batch_padding_mask,
    best_answer,
    build_features,
    split_words,
)
from kit.datasets.text import load_tokenizer
from kit.errors import InvalidParameter

FILE = "dev-v1.1.json"


def read_examples(path: Path) -> list[Example]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return [
            Example(
                qa["id"],
                qa["question"],
                para["context"],
                [a["text"] for a in qa["answers"]],
                split_words(para["context"]),
            )
            for article in data["data"]
            for para in article["paragraphs"]
            for qa in para["qas"]
        ]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InvalidParameter(
            "SQuAD file", str(path), f"a SQuAD v1.1 JSON with a 'data' list ({exc!r})"
        ) from exc


class Squad(Dataset):
    name = "squad"
    metric = "F1 Score"
    roles = {"ids": "input_ids.1", "mask": "attention_mask.1", "segment": "token_type_ids.1"}
    layout = f"{FILE} (SQuAD v1.1 dev JSON) and a tokenizer directory for the model"

    def __init__(
        self,
        root=None,
        input_names=None,
        *,
        tokenizer=None,
        tokenizer_dir=None,
        max_seq_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        n_best: int = 20,
        max_answer_length: int = 30,
        dtype: str = "int64",
        zero_segments: bool = False,
    ):
        super().__init__(root, input_names)
        self._tokenizer, self.tokenizer_dir = tokenizer, tokenizer_dir
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        self.max_query_length, self.n_best = max_query_length, n_best
        self.max_answer_length, self.dtype = max_answer_length, dtype
        self.zero_segments = zero_segments
        self._built: tuple | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        return None if (Path(root) / FILE).exists() else f"no {FILE}"

    def _vocabulary(self) -> ModelVocabulary:
        tok = self._tokenizer
        if tok is None:
            if self.tokenizer_dir is None:
                raise InvalidParameter("tokenizer_dir", None, "the model's tokenizer directory")
            tok = load_tokenizer(self.tokenizer_dir)
        return ModelVocabulary(tok)

    def _build(self) -> tuple[list[Example], list[Feature], dict[str, np.ndarray]]:
        if self._built is None:
            self.require()
            examples = read_examples(self.root / FILE)
            features = build_features(
                examples,
                self._vocabulary(),
                self.max_seq_length,
                self.doc_stride,
                self.max_query_length,
            )
            segments = np.asarray([f.segment_ids for f in features], dtype=self.dtype)
            arrays = {
                "ids": np.asarray([f.input_ids for f in features], dtype=self.dtype),
                "mask": np.asarray([f.input_mask for f in features], dtype=self.dtype),
                "segment": np.zeros_like(segments) if self.zero_segments else segments,
            }
            self._built = (examples, features, arrays)
        return self._built

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
        for idx in bytemlperf_batches(len(features), batch_size, data_percent):
            inputs = {role: a[idx] for role, a in arrays.items()}
            yield Batch(self.named(inputs), None, len(idx), batch_size, {"features": idx})

    def _logits(self, outputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if len(outputs) >= 2 and outputs[0].shape == outputs[1].shape:
            return outputs[0], outputs[1]
        if outputs[0].shape[-1] == 2:  # TF BERT: one [batch, seq, 2] logits tensor
            return outputs[0][..., 0], outputs[0][..., 1]
        raise InvalidParameter(
            "SQuAD outputs",
            [o.shape for o in outputs],
            "start and end logits [batch, seq], or one [batch, seq, 2]",
        )

    def predictions(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> tuple[dict, int]:
        """{question id: answer text} for every question ("empty" where no window was
        evaluated or none had a valid span, as ByteMLPerf writes it) and how many features."""
        examples, features, arrays = self._build()
        scored: dict[int, list] = {}
        count = 0
        for batch, outputs in results:
            start, end = self._logits(outputs)
            rows = batch.meta["features"][: batch.valid]
            padding = batch_padding_mask(arrays["mask"][rows])
            for row, f in enumerate(rows):
                s = np.where(padding, 0.0, start[row].astype(np.float64))
                e = np.where(padding, 0.0, end[row].astype(np.float64))
                scored.setdefault(features[f].example, []).append((features[f], s, e))
                count += 1
        answers = {
            ex.qid: best_answer(ex, scored.get(i, []), self.n_best, self.max_answer_length)
            for i, ex in enumerate(examples)
        }
        return answers, count

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        predictions, count = self.predictions(results)
        golds = {ex.qid: ex.answers for ex in self.examples}
        bytemlperf = squad_scores(golds, predictions, denominator=count)
        evaluated = {f.example for f in self.features[:count]}
        official = squad_scores(
            {self.examples[i].qid: self.examples[i].answers for i in evaluated}, predictions
        )
        return {
            "metric": self.metric,
            "value": round(bytemlperf["f1"], 5),
            "unit": "% (0-100)",
            "exact_match": round(bytemlperf["exact_match"], 5),
            "samples": count,
            "questions": len(evaluated),
            "f1_official": official["f1"],
            "exact_match_official": official["exact_match"],
            "rule": "ByteMLPerf: sums over all questions divided by evaluated features; "
            "*_official divide by the evaluated questions",
        }
