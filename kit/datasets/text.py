"""Load a model's own tokenizer from a local directory (no downloads), as a
`tokenizers.Tokenizer`."""

from __future__ import annotations

import json
from pathlib import Path

from kit.errors import MissingResource


def load_tokenizer(directory: Path | str):
    """tokenizer.json if present; a BERT vocab.txt (WordPiece); else transformers' fast tokenizer
    built from the files there (sentencepiece, vocab.json + merges.txt)."""
    directory = Path(directory)
    from tokenizers import Tokenizer

    if (directory / "tokenizer.json").exists():
        return Tokenizer.from_file(str(directory / "tokenizer.json"))
    if (directory / "vocab.txt").exists():
        return bert_wordpiece(directory / "vocab.txt", lowercase=_lowercase(directory))
    if any(directory.glob("*.model")) or (directory / "vocab.json").exists():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(directory), use_fast=True).backend_tokenizer
    raise MissingResource(
        f"no tokenizer in {directory}: put tokenizer.json (or vocab.txt, or the model's "
        "sentencepiece/BPE files) there, next to the weights"
    )


def _lowercase(directory: Path) -> bool:
    config = directory / "tokenizer_config.json"
    if config.exists():
        return bool(json.loads(config.read_text()).get("do_lower_case", True))
    return True


def bert_wordpiece(vocab_file: Path, lowercase: bool = True):
    """The BERT uncased/cased tokenizer from a vocab.txt: [CLS] A [SEP] B [SEP], type ids 0/1."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab: dict[str, int] = {}
    for i, line in enumerate(Path(vocab_file).read_text(encoding="utf-8").splitlines()):
        vocab.setdefault(line.rstrip("\n"), i)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        lowercase=lowercase, strip_accents=None, handle_chinese_chars=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    cls, sep = vocab.get("[CLS]", 101), vocab.get("[SEP]", 102)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok
