"""ImageNet 2012 validation images with labels, for the ResNet-50 and Swin rows (Top-1).

Two layouts: a `val_map.txt` file list (`<relative path> <label 0-999>` per line, MLPerf's and
ByteMLPerf's open_imagenet format), or one folder per class (class index = sorted folder order,
as torchvision's ImageFolder). Preprocessing with Pillow + numpy: shorter side resized to
crop/0.875 (256 for 224, 438 for 384), bilinear; centre crop; scale to [0, 1]; normalise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kit.datasets.base import Batch, Dataset, index_batches, pad_rows
from kit.errors import InvalidParameter
from kit.metrics import fraction

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def read_val_map(path: Path) -> list[tuple[Path, int]]:
    base = path.parent
    items = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise InvalidParameter(f"{path.name} line {n}", line, "'<image path> <integer label>'")
        image = base / parts[0]
        if not image.exists() and (base / "val" / parts[0]).exists():
            image = base / "val" / parts[0]
        items.append((image, int(parts[1])))
    return items


def read_class_folders(root: Path) -> list[tuple[Path, int]]:
    folder = root / "val" if (root / "val").is_dir() else root
    classes = sorted(d for d in folder.iterdir() if d.is_dir())
    return [(img, label) for label, d in enumerate(classes) for img in _images(d)]


def preprocess(path: Path, crop: int = 224, resize: int | None = None,
               mean=IMAGENET_MEAN, std=IMAGENET_STD, scale: float = 1 / 255,
               layout: str = "NCHW") -> np.ndarray:
    """One image as a float32 [3, crop, crop] (NCHW) or [crop, crop, 3] (NHWC) array."""
    from PIL import Image

    resize = resize or int(round(crop / 0.875))
    with Image.open(path) as img:
        img = img.convert("RGB")
        w, h = img.size
        ratio = resize / min(w, h)
        img = img.resize((max(crop, round(w * ratio)), max(crop, round(h * ratio))),
                         Image.Resampling.BILINEAR)
        w, h = img.size
        left, top = (w - crop) // 2, (h - crop) // 2
        arr = np.asarray(img.crop((left, top, left + crop, top + crop)), dtype=np.float32)
    arr = (arr * scale - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return arr.transpose(2, 0, 1) if layout == "NCHW" else arr


class ImageNet(Dataset):
    name = "imagenet"
    metric = "Top-1"
    roles = {"image": "input_1.1"}
    layout = "val_map.txt + images (or val/<class>/*.JPEG)"

    def __init__(self, root=None, input_names=None, *, crop: int = 224, resize: int | None = None,
                 mean=IMAGENET_MEAN, std=IMAGENET_STD, scale: float = 1 / 255, layout: str = "NCHW"):
        super().__init__(root, input_names)
        if layout not in ("NCHW", "NHWC"):
            raise InvalidParameter("layout", layout, "NCHW or NHWC")
        self.options = dict(crop=crop, resize=resize, mean=mean, std=std, scale=scale, layout=layout)
        self._items: list[tuple[Path, int]] | None = None

    @classmethod
    def missing(cls, root: Path) -> str | None:
        root = Path(root)
        if (root / "val_map.txt").exists():
            return None
        folder = root / "val" if (root / "val").is_dir() else root
        if folder.is_dir() and any(d.is_dir() and _images(d) for d in folder.iterdir()):
            return None
        return "no val_map.txt and no class folders with images"

    @property
    def items(self) -> list[tuple[Path, int]]:
        if self._items is None:
            self.require()
            vm = self.root / "val_map.txt"
            self._items = read_val_map(vm) if vm.exists() else read_class_folders(self.root)
        return self._items

    def __len__(self) -> int:
        return len(self.items)

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        for idx in index_batches(len(self.items), batch_size, data_percent):
            images = np.stack([preprocess(self.items[i][0], **self.options) for i in idx])
            labels = np.asarray([self.items[i][1] for i in idx], dtype=np.int64)
            yield Batch(self.named({"image": pad_rows(images, batch_size)}), labels, len(idx), batch_size)

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        correct = []
        for batch, outputs in results:
            scores = outputs[0][: batch.valid].reshape(batch.valid, -1)
            if scores.shape[1] == 1001:  # TF-slim models put a background class first
                scores = scores[:, 1:]
            correct.append(np.argmax(scores, axis=1) == batch.labels)
        flat = np.concatenate(correct)
        return {"metric": self.metric, "value": fraction(flat), "unit": "fraction (0-1)",
                "samples": int(flat.size), "correct": int(flat.sum())}
