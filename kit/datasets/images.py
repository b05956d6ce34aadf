"""Real-image preprocessing for the C2 protocol: decode, resize, centre-crop, normalise."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from kit.errors import MissingResource

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def sample_image_files() -> list[Path]:
    """The colour photographs that scikit-image ships (no download)."""
    import skimage

    folder = Path(skimage.__file__).parent / "data"
    names = (
        "astronaut.png",
        "chelsea.png",
        "coffee.png",
        "rocket.jpg",
        "motorcycle_left.png",
        "hubble_deep_field.jpg",
        "retina.jpg",
        "color.png",
    )
    return [folder / n for n in names if (folder / n).exists()]


def image_files(folder: str | Path | None) -> list[Path]:
    if folder in (None, "", "skimage"):
        files = sample_image_files()
    else:
        files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise MissingResource(
            f"no images ({', '.join(IMAGE_SUFFIXES)}) in {folder!r}; "
            "give image_dir a folder of photographs, or 'skimage' for the samples"
        )
    return files


def preprocess(encoded: bytes, size: int = 224) -> np.ndarray:
    """One encoded image -> normalised 3 x size x size float32 (resize shorter side, centre
    crop)."""
    from PIL import Image

    img = Image.open(io.BytesIO(encoded)).convert("RGB")
    scale = (size * 256 // 224) / min(img.size)
    img = img.resize(
        (max(size, round(img.width * scale)), max(size, round(img.height * scale))),
        Image.Resampling.BILINEAR,
    )
    left, top = (img.width - size) // 2, (img.height - size) // 2
    arr = np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    return ((arr - MEAN) / STD).transpose(2, 0, 1)


def preprocess_batch(encoded: list[bytes], size: int = 224) -> np.ndarray:
    return np.stack([preprocess(e, size) for e in encoded])
