import numpy as np
import pytest

from kit.datasets.metrics import (
    cail2019_correct,
    criteo_correct,
    fraction,
    normalize_answer,
    samples_for_percent,
    squad_exact_match,
    squad_f1,
    squad_scores,
    top1_correct,
)
from kit.errors import InvalidParameter


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),  # article + case
        ("an apple a day", "apple day"),  # a / an as words
        ("Theatre and anatomy", "theatre and anatomy"),  # articles only as whole words
        ("  Denver   Broncos\n", "denver broncos"),  # whitespace collapsed
        ("Broncos!", "broncos"),  # punctuation
        ("U.S.-based", "usbased"),  # punctuation inside words is dropped
        ("the.cat", "thecat"),  # punctuation removed before articles
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_take_the_best_gold_answer():
    golds = ["Denver Broncos", "the Broncos", "Broncos"]
    assert squad_exact_match("broncos.", golds) == 1.0
    assert squad_exact_match("Denver", golds) == 0.0
    # "Denver" vs "Denver Broncos": precision 1, recall 1/2 -> F1 2/3; the others score 0
    assert squad_f1("Denver", golds) == pytest.approx(2 / 3)
    # "the Denver Broncos team" -> [denver, broncos, team] vs [denver, broncos]: P 2/3, R 1 -> 0.8
    assert squad_f1("the Denver Broncos team", golds) == pytest.approx(0.8)
    assert squad_f1("a", ["the"]) == 0.0  # both normalise to nothing


def test_f1_counts_repeated_tokens_once_per_match():
    # [the, cat, cat] -> [cat, cat] vs [cat]: common 1, P 1/2, R 1 -> 2/3
    assert squad_f1("the cat cat", ["cat"]) == pytest.approx(2 / 3)


def test_squad_scores_official_and_bytemlperf_denominator():
    golds = {"q1": ["Paris"], "q2": ["blue sky", "sky"], "q3": ["42"]}
    preds = {"q1": "paris", "q2": "blue"}  # q3 unanswered scores 0
    s = squad_scores(golds, preds)
    assert s["exact_match"] == pytest.approx(100 / 3)
    # q2: "blue" vs "blue sky" P 1 R 1/2 -> 2/3; vs "sky" -> 0
    assert s["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    by_features = squad_scores(golds, preds, denominator=4)
    assert by_features["f1"] == pytest.approx(100 * (1 + 2 / 3) / 4)
    with pytest.raises(InvalidParameter):
        squad_scores({}, {}, denominator=0)


def test_top1_and_criteo_rule():
    scores = np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    assert top1_correct(scores, np.array([1, 2])).tolist() == [True, False]
    probs = np.array([[0.3, 0.7], [0.8, 0.2], [0.5, 0.5], [0.45, 0.55]])
    # 0.5/0.5 rounds to 0/0 -> class 0, so a positive label is wrong there
    assert criteo_correct(probs, np.array([1, 0, 1, 0])).tolist() == [True, True, False, False]


def test_cail2019_pairs():
    scores = np.array([[0.9], [0.1], [0.2], [0.3], [0.5], [0.5]])
    assert cail2019_correct(scores).tolist() == [True, False, False]  # ties are wrong
    with pytest.raises(InvalidParameter):
        cail2019_correct(np.zeros(3))
    with pytest.raises(InvalidParameter, match="one similarity score per row"):
        cail2019_correct(np.zeros((4, 2)))  # a softmax pair is not a similarity score


def test_fraction_and_data_percent():
    assert fraction(np.array([True, False, True, True])) == 0.75
    assert samples_for_percent(1000, 10) == 100
    assert samples_for_percent(7, 50) == 3
    assert samples_for_percent(7, 1) == 1  # never zero samples
    for bad in (0, 101, -5, "10", True):
        with pytest.raises(InvalidParameter):
            samples_for_percent(10, bad)
    with pytest.raises(InvalidParameter):
        fraction(np.array([], dtype=bool))
