"""ImageNet 2012 validation images with labels, for the ResNet-50 and Swin rows (Top-1), as
ByteMLPerf's `open_imagenet` evaluates them.

Two layouts: a `val_map.txt` file list (`<relative path> <label 0-999>` per line, ByteMLPerf's
format; images beside it, in `val/` or in `ILSVRC2012_img_val/`; missing images are skipped as
ByteMLPerf skips them), or one folder per class (class index = sorted folder order).

Preprocessing, by protocol (ByteMLPerf picks by framework and model name):
- "torch" (PyTorch/ONNX rows: resnet50 crop 224, swin-large crop 384): torchvision's
  `resize(256, BILINEAR)` (shorter side to 256, longer side truncated), `center_crop(crop)`, which
  pads with zeros when the crop is larger than the image (swin: a 256-pixel side padded to 384),
  then /255 and ImageNet mean/std; NCHW.
- "vgg" (TensorFlow rows): OpenCV's INTER_AREA resize of the shorter side to int(224/0.875)=256,
  a centre crop at int((w - crop)/2), minus the channel means (no scaling); NHWC.
Batches follow ByteMLPerf: indices shuffled with Python's `random.seed(7)`, only full batches,
the first int(data_percent% x batches) of them. Scoring: ByteMLPerf compares the argmax with
label + 1, after putting a 0 in front of PyTorch/ONNX outputs (1000 classes); 1001-class (TF)
outputs are taken as they are (column 0 is the background class).
Images are decoded with Pillow where ByteMLPerf uses OpenCV (both libjpeg); see `decoder` in
the result details.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kit.datasets.base import Batch, Dataset, bytemlperf_batches
from kit.errors import InvalidParameter

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
VGG_MEANS = (123.68, 116.78, 103.94)
IMAGE_FOLDERS = ("", "val", "ILSVRC2012_img_val")
PROTOCOLS = ("torch", "vgg")
SHUFFLE_SEED = 7
DECODER_NOTE = "Pillow (ByteMLPerf: OpenCV imread); both decode JPEG with libjpeg"


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def read_val_map(path: Path) -> list[tuple[Path, int]]:
    """(image, label) for each listed image that exists, in file order."""
    base = path.parent
    items = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise InvalidParameter(f"{path} line {n}", line, "'<image path> <integer label>'")
        found = [base / sub / parts[0] for sub in IMAGE_FOLDERS if (base / sub / parts[0]).exists()]
        if found:
            items.append((found[0], int(parts[1])))
    return items


def read_class_folders(root: Path) -> list[tuple[Path, int]]:
    folder = root / "val" if (root / "val").is_dir() else root
    classes = sorted(d for d in folder.iterdir() if d.is_dir())
    return [(img, label) for label, d in enumerate(classes) for img in _images(d)]


# --- the "torch" protocol: torchvision.transforms.functional on a PIL image ---------------------


def torchvision_resize(img, size: int = 256):
    """Shorter side to `size`, longer side int(size * long / short), bilinear (PIL antialiases)."""
    from PIL import Image

    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(size * long / short)
    new_w, new_h = (size, new_long) if w <= h else (new_long, size)
    return img.resize((new_w, new_h), Image.Resampling.BILINEAR)


def torchvision_center_crop(arr: np.ndarray, crop: int) -> np.ndarray:
    """HxWxC centre crop; a side shorter than `crop` is first padded with zeros, left/top getting
    (crop - side) // 2 and right/bottom the rest; offsets int(round((side - crop) / 2))."""
    h, w = arr.shape[:2]
    if crop > h or crop > w:
        pad_h, pad_w = max(crop - h, 0), max(crop - w, 0)
        arr = np.pad(arr, ((pad_h // 2, (pad_h + 1) // 2), (pad_w // 2, (pad_w + 1) // 2), (0, 0)))
        h, w = arr.shape[:2]
    top, left = int(round((h - crop) / 2.0)), int(round((w - crop) / 2.0))
    return arr[top : top + crop, left : left + crop]


def preprocess_torch(img, crop: int = 224, resize: int = 256) -> np.ndarray:
    """[3, crop, crop] float32: resize, zero-padding centre crop, to_tensor, normalise."""
    arr: np.ndarray = np.asarray(torchvision_resize(img, resize), dtype=np.uint8)
    arr = torchvision_center_crop(arr, crop).astype(np.float32) / 255.0
    arr = (arr - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    return arr.transpose(2, 0, 1).astype(np.float32)


# --- the "vgg" protocol: OpenCV INTER_AREA --------------------------------------------------------


def area_weights(src: int, dst: int, shrink: bool = True) -> np.ndarray:
    """[dst, src] weights of OpenCV's INTER_AREA when shrinking: each output pixel averages the
    source interval [i * s, (i + 1) * s), s = src / dst, by overlap; when growing, OpenCV's
    two-tap "area mode" weights (OpenCV uses those on both axes unless both shrink)."""
    weights = np.zeros((dst, src))
    scale = src / dst
    if shrink:
        for i in range(dst):
            lo, hi = i * scale, min((i + 1) * scale, src)
            cell = hi - lo
            for j in range(int(np.floor(lo)), int(np.ceil(hi))):
                overlap = min(hi, j + 1) - max(lo, j)
                if overlap > 1e-3:
                    weights[i, j] = overlap / cell
        return weights / weights.sum(axis=1, keepdims=True)
    inverse = dst / src
    for i in range(dst):  # OpenCV resize.cpp, area_mode: sx = floor(i*s), fx from the cell edge
        j = int(np.floor(i * scale))
        frac = (i + 1) - (j + 1) * inverse
        frac = 0.0 if frac <= 0 else frac - np.floor(frac)
        weights[i, min(j, src - 1)] += 1 - frac
        weights[i, min(j + 1, src - 1)] += frac
    return weights


def cv2_area_resize(arr: np.ndarray, width: int, height: int) -> np.ndarray:
    """HxWxC uint8 resized as cv2.resize(..., INTER_AREA). Checked against OpenCV 4 on random
    images: integer factors exact; other shrinking factors within 1 level on under 0.03 % of
    values (float rounding); enlarging (images under 256 pixels) within 1 level on some 8 %
    (OpenCV's fixed-point arithmetic)."""
    shrink = arr.shape[0] >= height and arr.shape[1] >= width
    if shrink and arr.shape[0] % height == 0 and arr.shape[1] % width == 0:
        return _area_integer_scale(arr, arr.shape[0] // height, arr.shape[1] // width)
    wy, wx = area_weights(arr.shape[0], height, shrink), area_weights(arr.shape[1], width, shrink)
    out = np.einsum("ys,sxc->yxc", wy, np.einsum("xs,ysc->yxc", wx, arr.astype(np.float64)))
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _area_integer_scale(arr: np.ndarray, ky: int, kx: int) -> np.ndarray:
    """OpenCV's integer-factor INTER_AREA: block sums; 2x2 rounds (sum + 2) >> 2, other factors
    round sum * (1 / area) in float32 to nearest even."""
    h, w, c = arr.shape
    sums = arr.astype(np.int64).reshape(h // ky, ky, w // kx, kx, c).sum(axis=(1, 3))
    if ky == kx == 2:
        return ((sums + 2) >> 2).astype(np.uint8)
    scaled = sums.astype(np.float32) * np.float32(1.0 / (ky * kx))
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def preprocess_vgg(img, crop: int = 224, scale: float = 87.5) -> np.ndarray:
    """[crop, crop, 3] float32: ByteMLPerf's pre_process_vgg."""
    arr = np.asarray(img, dtype=np.uint8)
    height, width = arr.shape[:2]
    new = int(100.0 * crop / scale)
    if height > width:
        w, h = new, int(new * height / width)
    else:
        h, w = new, int(new * width / height)
    arr = cv2_area_resize(arr, w, h)
    left, right = int((w - crop) / 2), int((w + crop) / 2)
    top, bottom = int((h - crop) / 2), int((h + crop) / 2)
    out = arr[top:bottom, left:right].astype(np.float32)
    return out - np.asarray(VGG_MEANS, np.float32)


def preprocess(path: Path, protocol: str = "torch", crop: int = 224) -> np.ndarray:
    """One image file as the model's input under `protocol` ("torch": NCHW, "vgg": NHWC)."""
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB")
    return preprocess_torch(rgb, crop) if protocol == "torch" else preprocess_vgg(rgb, crop)


def top1_plus_one(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ByteMLPerf's ImageNet rule: argmax == label + 1, with a 0 put in front of outputs that have
    no background column (all but TF-slim's 1001 classes), so an all-negative row is wrong."""
    scores = np.asarray(scores, dtype=np.float64).reshape(len(scores), -1)
    if scores.shape[1] != 1001:
        scores = np.concatenate([np.zeros((len(scores), 1)), scores], axis=1)
    return np.argmax(scores, axis=1) == np.asarray(labels).ravel() + 1


class ImageNet(Dataset):
    name = "imagenet"
    metric = "Top-1"
    roles = {"image": "input_1.1"}
    layout = (
        "val_map.txt + images (beside it, in val/ or ILSVRC2012_img_val/), or val/<class>/*.JPEG"
    )

    def __init__(self, root=None, input_names=None, *, protocol: str = "torch", crop: int = 224):
        super().__init__(root, input_names)
        if protocol not in PROTOCOLS:
            raise InvalidParameter("protocol", protocol, f"one of {PROTOCOLS}")
        if isinstance(crop, bool) or not isinstance(crop, int) or crop <= 0:
            raise InvalidParameter("crop", crop, "a positive integer")
        self.options: dict[str, Any] = dict(protocol=protocol, crop=crop)
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
        for idx in bytemlperf_batches(len(self.items), batch_size, data_percent, SHUFFLE_SEED):
            images = np.stack([preprocess(self.items[i][0], **self.options) for i in idx])
            labels = np.asarray([self.items[i][1] for i in idx], dtype=np.int64)
            yield Batch(
                self.named({"image": images}), labels, len(idx), batch_size, {"images": idx}
            )

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        flat = np.concatenate(
            [top1_plus_one(out[0][: b.valid], b.known_labels()) for b, out in results]
        )
        return {
            "metric": self.metric,
            "value": round(float(flat.mean()), 5),
            "unit": "fraction (0-1)",
            "samples": int(flat.size),
            "correct": int(flat.sum()),
            "decoder": DECODER_NOTE,
            "protocol": f"ByteMLPerf open_imagenet, {self.options['protocol']} preprocessing, "
            f"crop {self.options['crop']}",
        }
