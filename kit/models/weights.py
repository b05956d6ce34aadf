"""Where weights come from: random init (default), a local directory, or an opt-in download."""

from __future__ import annotations

from pathlib import Path

from kit.errors import InvalidParameter, MissingResource
from kit.models.spec import WeightsInfo
from kit.paths import weights_dir

WEIGHT_SOURCES = ("random", "local")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.pt", "model.keras", "model.weights.h5")


def resolve_weights(model: str, weights: str, seed: int = 0) -> tuple[WeightsInfo, Path | None]:
    """Turn the `weights` parameter into a WeightsInfo and the directory to load from.

    `weights` is "random", "local" (data/weights/<model>/) or a path to a directory.
    """
    if weights == "random":
        return WeightsInfo("random", f"seed {seed}"), None
    directory = weights_dir(model) if weights == "local" else Path(weights)
    if weights not in WEIGHT_SOURCES and not directory.exists() and "/" not in weights:
        raise InvalidParameter("weights", weights, "'random', 'local' or a directory path")
    if not directory.is_dir() or not any((directory / f).exists() for f in WEIGHT_FILES):
        raise MissingResource(
            f"no weights for {model} in {directory}: put one of {', '.join(WEIGHT_FILES)} there "
            f"(see data/weights/README.md), run `kit fetch-weights {model}` on a machine with "
            "internet, or use weights='random'"
        )
    return WeightsInfo("local", str(directory)), directory
