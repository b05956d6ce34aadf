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
    return weights_info_for(directory), directory


HUB_MARKER = "HUB_ID"  # written by fetch_weights: the hub id the directory was downloaded from
HUB_PATTERNS = ["config.json", "*.safetensors", "pytorch_model.bin", "model.weights.h5"]


def weights_info_for(directory: Path) -> WeightsInfo:
    marker = directory / HUB_MARKER
    if marker.exists():
        return WeightsInfo("hub", f"{marker.read_text().strip()} (in {directory})")
    return WeightsInfo("local", str(directory))


def fetch_weights(model: str, hub_id: str | None, destination: Path | None = None) -> Path:
    """Opt-in download of the public checkpoint `hub_id` into data/weights/<model>/."""
    destination = destination or weights_dir(model)
    if hub_id is None:
        raise MissingResource(
            f"{model} has no public checkpoint on the Hugging Face hub; put its weights in "
            f"{destination} as described in data/weights/README.md")
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=hub_id, local_dir=str(destination), allow_patterns=HUB_PATTERNS)
    except Exception as exc:  # noqa: BLE001 - network, offline mode, missing repo: all one answer
        raise MissingResource(
            f"could not download {hub_id} for {model} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "fetch-weights needs internet access to huggingface.co") from exc
    (destination / HUB_MARKER).write_text(hub_id + "\n")
    return destination
