"""CIFAR-100 test set (python pickles) for the VideoBERT row: zero-shot Top-1 over 100 prompts.

Reads `cifar-100-python/test` (b"data" [10000, 3072] uint8 in RGB planes, b"fine_labels") and
`meta` (b"fine_label_names"). The model takes a batch of images and the fixed [100, 77] token
ids of one prompt per class and returns logits per image [batch, 100]; Top-1 = argmax equals
the fine label (ByteMLPerf's open_cifar rule). The prompt ids come from `text.npy` in the dataset
folder if present, else from the class names, `prompt` and the model's CLIP tokenizer.
Images: shorter side resized to 224 (bicubic), centre crop, CLIP's mean/std.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, bytemlperf_batches
from kit.datasets.metrics import fraction, top1_correct
from kit.datasets.text import load_tokenizer
from kit.errors import InvalidParameter, KitError, MissingResource

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _folder(root: Path) -> Path:
    return root / "cifar-100-python" if (root / "cifar-100-python").is_dir() else root


# What CIFAR's pickles hold (dicts, lists, bytes and numpy arrays); anything else is refused.
ALLOWED_GLOBALS = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }
)


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds plain data and numpy arrays, never calls anything else: a tampered
    file cannot run code."""

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"refers to {module}.{name}, not plain data or a numpy array"
            )
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    with open(path, "rb") as f:
        try:
            return _ArraysOnly(f, encoding="bytes").load()
        except pickle.UnpicklingError as exc:
            raise KitError(
                f"{path}: refused: it {exc}, and unpickling it could run code (CIFAR's own "
                f"pickles hold only lists and arrays); fetch it again with `kit fetch-data "
                f"cifar100` (md5-checked)"
            ) from None


def read_test(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images [n, 32, 32, 3] uint8 and fine labels [n]."""
    d = _unpickle(_folder(root) / "test")
    data = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return data, np.asarray(d[b"fine_labels"], dtype=np.int64)


def class_names(root: Path) -> list[str]:
    meta = _folder(root) / "meta"
    if not meta.exists():
        raise MissingResource(f"cifar: no {meta} (the class names for the prompts)")
    return [n.decode().replace("_", " ") for n in _unpickle(meta)[b"fine_label_names"]]


def prompt_ids(
    names: list[str], tokenizer, prompt: str = "a photo of a {}.", length: int = 77
) -> np.ndarray:
    """[len(names), length] int64: CLIP's <start> tokens <end>, zero padded, cut at `length`."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_padding()
    tok.no_truncation()
    out = np.zeros((len(names), length), dtype=np.int64)
    for i, enc in enumerate(tok.encode_batch([prompt.format(n) for n in names])):
        ids = enc.ids[:length]
        out[i, : len(ids)] = ids
    return out


def clip_image(image: np.ndarray, size: int = 224) -> np.ndarray:
    """[3, size, size] float32 from an HxWx3 uint8 image."""
    from PIL import Image

    img = Image.fromarray(image)
    w, h = img.size
    ratio = size / min(w, h)
    img = img.resize(
        (max(size, round(w * ratio)), max(size, round(h * ratio))), Image.Resampling.BICUBIC
    )
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    arr: np.ndarray = (
        np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    )
    arr = (arr - np.asarray(CLIP_MEAN, np.float32)) / np.asarray(CLIP_STD, np.float32)
    return arr.transpose(2, 0, 1)


class Cifar100(Dataset):
    name = "cifar100"
    metric = "Top-1"
    roles = {"image": "image", "text": "text"}
    layout = "cifar-100-python/{test,meta} pickles, plus text.npy or the CLIP tokenizer directory"

    def __init__(
        self,
        root=None,
        input_names=None,
        *,
        tokenizer=None,
        tokenizer_dir=None,
        prompt: str = "a photo of a {}.",
        image_size: int = 224,
        text_length: int = 77,
    ):
        super().__init__(root, input_names)
        self._tokenizer, self.tokenizer_dir = tokenizer, tokenizer_dir
        self.prompt, self.image_size, self.text_length = prompt, image_size, text_length
        self._data: tuple[np.ndarray, np.ndarray] | None = None
        self._text: np.ndarray | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        return None if (_folder(Path(root)) / "test").exists() else "no cifar-100-python/test"

    @property
    def data(self) -> tuple[np.ndarray, np.ndarray]:
        if self._data is None:
            self.require()
            self._data = read_test(self.root)
        return self._data

    @property
    def text(self) -> np.ndarray:
        """The fixed [100, 77] prompt ids fed with every batch."""
        if self._text is None:
            cached = self.root / "text.npy"
            if cached.exists():
                self._text = np.load(cached).astype(np.int64)
            else:
                tok = self._tokenizer
                if tok is None:
                    if self.tokenizer_dir is None:
                        raise InvalidParameter(
                            "tokenizer_dir",
                            None,
                            f"the CLIP tokenizer directory, or put text.npy in {self.root}",
                        )
                    tok = load_tokenizer(self.tokenizer_dir)
                self._text = prompt_ids(class_names(self.root), tok, self.prompt, self.text_length)
        return self._text

    def __len__(self) -> int:
        return len(self.data[1])

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        images, labels = self.data
        text = self.text
        for idx in bytemlperf_batches(len(labels), batch_size, data_percent):
            batch = np.stack([clip_image(images[i], self.image_size) for i in idx])
            inputs = {"image": batch, "text": text}
            yield Batch(self.named(inputs), labels[idx], len(idx), batch_size)

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        correct = np.concatenate(
            [top1_correct(out[0][: b.valid], b.known_labels()) for b, out in results]
        )
        return {
            "metric": self.metric,
            "value": round(fraction(correct), 5),
            "unit": "fraction (0-1)",
            "samples": int(correct.size),
            "correct": int(correct.sum()),
        }
