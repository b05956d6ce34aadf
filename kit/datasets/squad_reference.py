"""BERT's reference SQuAD v1.1 input building and answer writing, which ByteMLPerf's open_squad
uses for every SQuAD row (bert, albert, roberta, deberta) with each model's own tokeniser.

Features (`create_squad_data.convert_examples_to_features`): the context is split on whitespace
into words; each word is tokenised on its own; the question is tokenised whole and cut to 64
tokens; windows of `384 - len(question) - 3` context tokens start every 128 tokens; a window is
the literal tokens `[CLS] question [SEP] context [SEP]` turned into ids by the vocabulary
(a tokeniser without `[CLS]`/`[SEP]`, such as RoBERTa's, maps them to its unknown token), then
zero-padded to 384 with mask 1 on real tokens and segment ids 0 (question) / 1 (context).
Answers (`accuracy_squad.write_predictions`): the 20 best start and end positions of each window,
kept when both are context tokens, the start is in its max-context window, end >= start and the
span is at most 30 tokens; the best sum of logits wins; its text is the window's tokens joined
(WordPiece "##" removed) projected onto the original words by `get_final_text` (BERT's basic
tokeniser, lower case); a question without a candidate answers "empty".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kit.errors import InvalidParameter

UNK_TOKENS = ("[UNK]", "<unk>", "<UNK>")


@dataclass
class Example:
    qid: str
    question: str
    context: str
    answers: list[str]
    words: list[str]


@dataclass(kw_only=True)
class Feature:
    example: int
    tokens: list[str]
    token_to_word: dict[int, int]  # window position -> index in the example's words
    max_context: dict[int, bool]  # window position -> is this window the token's best context
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


def is_squad_whitespace(ch: str) -> bool:
    return ch in " \t\r\n" or ord(ch) == 0x202F


def split_words(text: str) -> list[str]:
    """The context split as BERT's read_squad_examples splits it."""
    words: list[str] = []
    previous_space = True
    for ch in text:
        if is_squad_whitespace(ch):
            previous_space = True
            continue
        if previous_space:
            words.append(ch)
        else:
            words[-1] += ch
        previous_space = False
    return words


class ModelVocabulary:
    """`tokenize` and `convert_tokens_to_ids` of a model's tokeniser (a `tokenizers.Tokenizer`),
    as the transformers fast tokenisers ByteMLPerf loads behave: tokens of text without special
    tokens; unknown tokens map to the unknown token's id."""

    def __init__(self, tokenizer):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_str(tokenizer.to_str())
        self.tok.no_padding()
        self.tok.no_truncation()
        unk = getattr(self.tok.model, "unk_token", None)
        candidates = [unk, *UNK_TOKENS] if isinstance(unk, str) else list(UNK_TOKENS)
        self.unk_id = next(
            (i for i in (self.tok.token_to_id(t) for t in candidates) if i is not None), 0
        )

    def tokenize(self, text: str) -> list[str]:
        return self.tok.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self._id(t) for t in tokens]

    def _id(self, token: str) -> int:
        i = self.tok.token_to_id(token)
        return self.unk_id if i is None else i


def _is_max_context(spans: list[tuple[int, int]], current: int, position: int) -> bool:
    best_score, best = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if start <= position <= end:
            score = min(position - start, end - position) + 0.01 * length
            if best_score is None or score > best_score:
                best_score, best = score, index
    return best == current


def build_features(
    examples: list[Example],
    vocab: ModelVocabulary,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
) -> list[Feature]:
    """Every window of every example, as convert_examples_to_features builds them."""
    features = []
    for index, example in enumerate(examples):
        query = vocab.tokenize(example.question)[:max_query_length]
        token_to_word, doc_tokens = [], []
        for w, word in enumerate(example.words):
            for piece in vocab.tokenize(word):
                token_to_word.append(w)
                doc_tokens.append(piece)
        room = max_seq_length - len(query) - 3
        if room <= 0:
            raise InvalidParameter(
                "max_seq_length",
                max_seq_length,
                f"room for the {len(query)}-token question of {example.qid!r} and context",
            )
        spans, start = [], 0
        while start < len(doc_tokens):
            length = min(len(doc_tokens) - start, room)
            spans.append((start, length))
            if start + length == len(doc_tokens):
                break
            start += min(length, doc_stride)
        for s, (span_start, length) in enumerate(spans):
            tokens = ["[CLS]", *query, "[SEP]"]
            segments = [0] * len(tokens)
            to_word, best = {}, {}
            for i in range(length):
                position = span_start + i
                to_word[len(tokens)] = token_to_word[position]
                best[len(tokens)] = _is_max_context(spans, s, position)
                tokens.append(doc_tokens[position])
                segments.append(1)
            tokens.append("[SEP]")
            segments.append(1)
            ids = vocab.convert_tokens_to_ids(tokens)
            pad = max_seq_length - len(ids)
            features.append(
                Feature(
                    example=index,
                    tokens=tokens,
                    token_to_word=to_word,
                    max_context=best,
                    input_ids=ids + [0] * pad,
                    input_mask=[1] * len(ids) + [0] * pad,
                    segment_ids=segments + [0] * pad,
                )
            )
    return features


def basic_tokens(text: str) -> list[str]:
    """BERT's BasicTokenizer(do_lower_case=True): clean, split CJK, lower-case, strip accents,
    split on whitespace and punctuation."""
    from tokenizers import normalizers, pre_tokenizers

    norm = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
    )
    return [
        t for t, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(norm.normalize_str(text))
    ]


def _without_spaces(text: str) -> tuple[str, dict[int, int]]:
    chars: list[str] = []
    positions: dict[int, int] = {}
    for i, ch in enumerate(text):
        if ch != " ":
            positions[len(chars)] = i
            chars.append(ch)
    return "".join(chars), positions


def final_text(predicted: str, original: str) -> str:
    """BERT's get_final_text: the span of `original` that `predicted` (normalised tokens) covers,
    or all of `original` when the two cannot be aligned."""
    tokenized = " ".join(basic_tokens(original))
    start = tokenized.find(predicted)
    if start == -1:
        return original
    end = start + len(predicted) - 1
    orig_chars, orig_map = _without_spaces(original)
    tok_chars, tok_map = _without_spaces(tokenized)
    if len(orig_chars) != len(tok_chars):
        return original
    tok_to_chars = {pos: i for i, pos in tok_map.items()}
    if start not in tok_to_chars or end not in tok_to_chars:
        return original
    first, last = orig_map.get(tok_to_chars[start]), orig_map.get(tok_to_chars[end])
    if first is None or last is None:
        return original
    return original[first : last + 1]


def _best_indexes(logits: Sequence[float] | np.ndarray, n: int) -> list[int]:
    return [i for i, _ in sorted(enumerate(logits), key=lambda x: x[1], reverse=True)[:n]]


def answer_text(feature: Feature, example: Example, start: int, end: int) -> str:
    pieces = " ".join(feature.tokens[start : end + 1]).replace(" ##", "").replace("##", "")
    predicted = " ".join(pieces.strip().split())
    words = example.words[feature.token_to_word[start] : feature.token_to_word[end] + 1]
    return final_text(predicted, " ".join(words))


def best_answer(
    example: Example,
    scored: list[tuple[Feature, np.ndarray, np.ndarray]],
    n_best: int = 20,
    max_answer_length: int = 30,
) -> str:
    """write_predictions' answer for one example from its scored windows."""
    candidates: list[tuple[float, int, int, int]] = []
    for f, (feature, start_logits, end_logits) in enumerate(scored):
        starts, ends = _best_indexes(start_logits, n_best), _best_indexes(end_logits, n_best)
        for s in starts:
            for e in ends:
                if s >= len(feature.tokens) or e >= len(feature.tokens):
                    continue
                if s not in feature.token_to_word or e not in feature.token_to_word:
                    continue
                if not feature.max_context.get(s, False) or e < s or e - s + 1 > max_answer_length:
                    continue
                candidates.append((float(start_logits[s]) + float(end_logits[e]), f, s, e))
    if not candidates:
        return "empty"
    _, f, s, e = sorted(candidates, key=lambda c: c[0], reverse=True)[0]
    return answer_text(scored[f][0], example, s, e)


def batch_padding_mask(masks: np.ndarray) -> np.ndarray:
    """ByteMLPerf zeroes every row's logits wherever *any* row of the batch has mask 0."""
    return (np.asarray(masks) == 0).any(axis=0)
