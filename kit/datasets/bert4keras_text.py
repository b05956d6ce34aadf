"""A tokeniser that encodes as bert4keras' `Tokenizer` does, for ByteMLPerf's CAIL2019 inputs.

ByteMLPerf's `open_cail2019/pre_process_data.py` builds its features with
`bert4keras.tokenizers.Tokenizer(vocab.txt, do_lower_case=True, pre_tokenize=jieba.cut(HMM=False))`
and `encode(A, X, maxlen=1024)`. This module reproduces those rules without bert4keras (which
pulls in Keras 2): lower-case + NFD with combining marks dropped; jieba words kept whole when the
vocabulary has them, else split into characters/punctuation and greedy longest-match WordPiece
(a word with no match becomes one unknown token); `[CLS] A [SEP] X [SEP]`; while too long, drop
the token before the final [SEP] of the longer side (the first side on ties).
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

from kit.errors import BackendUnavailable, MissingResource

WORD_MAXLEN = 200


def load_vocab(path: Path) -> dict[str, int]:
    """bert4keras' load_vocab: first whitespace field of each line (the line if none) -> its
    position, numbering as it does (a repeated token takes the count at its repeat)."""
    vocab: dict[str, int] = {}
    for line in Path(path).read_text(encoding="utf-8", errors="ignore").splitlines(keepends=True):
        fields = line.split()
        vocab[fields[0] if fields else line.strip()] = len(vocab)
    return vocab


def jieba_words(hmm: bool = False) -> Callable[[str], Iterable[str]]:
    """jieba's word segmentation, as ByteMLPerf calls it (`jieba.cut(s, HMM=False)`)."""
    try:
        import jieba
    except ImportError as exc:
        raise BackendUnavailable("CAIL2019 features need jieba (requirements.txt)") from exc
    jieba.setLogLevel(logging.WARNING)
    return lambda text: jieba.cut(text, HMM=hmm)


def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    return (
        33 <= code <= 47
        or 58 <= code <= 64
        or 91 <= code <= 96
        or 123 <= code <= 126
        or unicodedata.category(ch).startswith("P")
    )


_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in _CJK)


def _is_space(ch: str) -> bool:
    return ch in " \n\r\t" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf")


class Bert4kerasTokenizer:
    """Encodes text pairs as bert4keras' Tokenizer with a pre-tokeniser."""

    def __init__(
        self,
        vocab: dict[str, int],
        lowercase: bool = True,
        pre_tokenize: Callable[[str], Iterable[str]] | None = None,
    ):
        if "[UNK]" not in vocab:
            raise MissingResource(
                "the CAIL2019 vocabulary has no [UNK] token: not a BERT-style vocab.txt"
            )
        self.vocab, self.lowercase, self.pre_tokenize = vocab, lowercase, pre_tokenize
        self.unk = vocab["[UNK]"]

    @classmethod
    def from_vocab_file(cls, path: Path, jieba: bool = True) -> Bert4kerasTokenizer:
        return cls(load_vocab(path), True, jieba_words() if jieba else None)

    def _normalise(self, text: str) -> str:
        text = unicodedata.normalize("NFD", text.lower())
        return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")

    def _wordpiece(self, word: str) -> list[str]:
        if len(word) > WORD_MAXLEN:
            return [word]
        tokens, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = ("##" if start else "") + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return [word]
            tokens.append(piece)
            start = end
        return tokens

    def _basic(self, text: str) -> list[str]:
        spaced = []
        for ch in text:
            if _is_punctuation(ch) or _is_cjk(ch):
                spaced.append(f" {ch} ")
            elif _is_space(ch):
                spaced.append(" ")
            elif ord(ch) in (0, 0xFFFD) or _is_control(ch):
                continue
            else:
                spaced.append(ch)
        return [t for word in "".join(spaced).split() for t in self._wordpiece(word)]

    def tokens(self, text: str) -> list[str]:
        """`[CLS]`, the text's tokens, `[SEP]`."""
        if self.lowercase:
            text = self._normalise(text)
        if self.pre_tokenize is None:
            body = self._basic(text)
        else:
            body = [
                t
                for word in self.pre_tokenize(text)
                for t in ([word] if word in self.vocab else self._basic(word))
            ]
        return ["[CLS]", *body, "[SEP]"]

    def encode(self, first: str, second: str, maxlen: int) -> tuple[list[int], list[int]]:
        """Token and segment ids of `[CLS] first [SEP] second [SEP]`, at most `maxlen` long."""
        a, b = self.tokens(first), self.tokens(second)
        sequences = [s for s in (a, b) if s]
        while sum(len(s) for s in sequences) > maxlen + 1:  # b's [CLS] is dropped below
            longest = max(range(len(sequences)), key=lambda i: (len(sequences[i]), -i))
            sequences[longest].pop(-2)
        ids = [self.vocab.get(t, self.unk) for t in a + b[1:]]
        return ids, [0] * len(a) + [1] * (len(b) - 1)
