"""Accuracy metrics as ByteMLPerf computes them for the published rows.

SQuAD v1.1 exact match / F1 use the official normalisation (lowercase, drop punctuation, drop
the articles a/an/the, collapse whitespace) and take the best score over the gold answers.
Top-1, Criteo's rounded-probability rule and CAIL2019's pairwise rule follow ByteMLPerf's
`test_accuracy.py` of each dataset.

>>> normalize_answer("The  Cat's hat!")
'cats hat'
>>> squad_f1("the cat sat", ["a cat sat down"])
0.8
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from kit.errors import InvalidParameter

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower, strip punctuation, then articles, then extra spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _f1_one(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer."""
    norm = normalize_answer(prediction)
    return float(any(norm == normalize_answer(g) for g in golds))


def squad_f1(prediction: str, golds: Sequence[str]) -> float:
    """Token-overlap F1, the maximum over the gold answers."""
    return max((_f1_one(prediction, g) for g in golds), default=0.0)


def squad_scores(
    golds: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    denominator: int | None = None,
) -> dict:
    """Exact match and F1 in percent (0-100) over the questions in `golds`.

    A question without a prediction scores 0. `denominator` overrides the count divided by:
    ByteMLPerf divides by the number of evaluated *features* (windows), not questions.
    """
    em = f1 = 0.0
    for qid, answers in golds.items():
        if qid in predictions:
            em += squad_exact_match(predictions[qid], answers)
            f1 += squad_f1(predictions[qid], answers)
    total = len(golds) if denominator is None else denominator
    if total <= 0:
        raise InvalidParameter("denominator", total, "a positive count of questions or features")
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total, "count": total}


def top1_correct(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Boolean per sample: argmax of the scores equals the label."""
    scores = np.asarray(scores)
    return np.argmax(scores.reshape(len(scores), -1), axis=1) == np.asarray(labels).ravel()


def criteo_correct(probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ByteMLPerf's Criteo rule: argmax of the *rounded* class probabilities equals the
    rounded label (so a 0.5/0.5 output rounds to 0/0 and counts as class 0)."""
    probs = np.asarray(probabilities, dtype=np.float64)
    probs = probs.reshape(len(probs), -1)
    return (
        np.argmax(np.round(probs), axis=1) == np.round(np.asarray(labels, dtype=np.float64)).ravel()
    )


def cail2019_correct(scores: np.ndarray) -> np.ndarray:
    """ByteMLPerf's CAIL2019 pairwise rule: rows come in pairs (A with the more similar case,
    A with the other one); a pair is right when the first row scores strictly higher. One score
    per row ([n] or [n, 1]): ByteMLPerf compares elementwise, so several columns are an error."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim > 1 and int(np.prod(s.shape[1:])) != 1:
        raise InvalidParameter(
            "CAIL2019 scores", f"shape {s.shape}", "one similarity score per row"
        )
    s = s.reshape(len(s))
    if len(s) % 2:
        raise InvalidParameter(
            "CAIL2019 scores", f"{len(s)} rows", "an even number of rows (pairs)"
        )
    return s[0::2] > s[1::2]


def fraction(correct: Iterable[bool] | np.ndarray) -> float:
    """Share of True values (0-1), as ByteMLPerf reports Top-1."""
    arr = np.asarray(list(correct) if not isinstance(correct, np.ndarray) else correct, dtype=bool)
    if arr.size == 0:
        raise InvalidParameter("samples", 0, "at least one evaluated sample")
    return float(arr.mean())


def validate_data_percent(data_percent: object) -> float:
    if (
        isinstance(data_percent, bool)
        or not isinstance(data_percent, int | float)
        or not 0 < data_percent <= 100
    ):
        raise InvalidParameter("data_percent", data_percent, "a number in (0, 100]")
    return float(data_percent)


def samples_for_percent(total: int, data_percent: float) -> int:
    """How many of `total` samples a `data_percent` run evaluates (at least one, the first ones)."""
    pct = validate_data_percent(data_percent)
    if total <= 0:
        return 0
    return max(1, min(total, int(total * pct / 100.0)))
