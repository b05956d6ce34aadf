"""Where weights come from: random init (default), a local directory, or an opt-in download."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

from kit.errors import CorruptModel, InvalidParameter, MissingResource
from kit.models.spec import WeightsInfo
from kit.paths import weights_dir

WEIGHT_SOURCES = ("random", "local")
WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.pt",
    "model.keras",
    "model.weights.h5",
)


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
    for name in WEIGHT_FILES:
        if (directory / name).exists():
            check_weights_file(directory / name)
    return weights_info_for(directory), directory


SAFETENSORS_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
}
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _corrupt(path: Path, what: str) -> CorruptModel:
    return CorruptModel(
        f"weights file {path} is damaged or not what its name says: {what}; "
        "replace it (see data/weights/README.md) or use weights='random'"
    )


def check_safetensors(path: Path) -> dict:
    """The tensor table of a .safetensors file, after checking its header against the file size."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _corrupt(path, f"{size} bytes, shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if not 2 <= length <= size - 8:
            raise _corrupt(path, f"header length {length} does not fit a {size}-byte file")
        try:
            table = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _corrupt(path, f"header is not JSON ({exc})") from exc
    if not isinstance(table, dict):
        raise _corrupt(path, "header is not a JSON object")
    data = size - 8 - length
    for name, info in table.items():
        if name == "__metadata__":
            continue
        try:
            start, end = info["data_offsets"]
            count = 1
            for d in info["shape"]:
                count *= int(d)
            width = SAFETENSORS_BYTES[info["dtype"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise _corrupt(path, f"tensor {name!r} has a malformed entry {info!r}") from exc
        if not 0 <= start <= end <= data:
            raise _corrupt(
                path,
                f"tensor {name!r} lies at bytes {start}-{end} of a {data}-byte data section "
                "(truncated file?)",
            )
        if end - start != count * width:
            raise _corrupt(
                path,
                f"tensor {name!r} {info['dtype']}{list(info['shape'])} needs "
                f"{count * width} bytes, the file gives it {end - start}",
            )
    return table


def check_weights_file(path: Path) -> None:
    """A cheap structural check (header, archive directory, signature) before any framework
    loads `path`, so a damaged file is an error naming it rather than a framework traceback."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise _corrupt(path, "the file is empty")
    if path.suffix == ".safetensors":
        check_safetensors(path)
    elif path.suffix in (".pt", ".bin", ".keras"):
        with open(path, "rb") as f:
            first = f.read(2)
        if zipfile.is_zipfile(path):
            try:
                with zipfile.ZipFile(path) as z:
                    z.namelist()
            except (zipfile.BadZipFile, OSError) as exc:
                raise _corrupt(path, f"damaged archive ({exc})") from exc
        elif path.suffix == ".keras" or first[:1] != b"\x80":
            raise _corrupt(path, "neither a zip archive (torch.save, .keras) nor a legacy pickle")
    elif path.suffix == ".h5":
        with open(path, "rb") as f:
            head = f.read(len(HDF5_SIGNATURE))
        if head != HDF5_SIGNATURE:
            raise _corrupt(path, "no HDF5 signature at the start of the file")


def load_torch_state(directory: Path) -> tuple[dict, Path]:
    """The state dict in model.safetensors, model.pt or pytorch_model.bin, and the file it came
    from; a file that cannot be read is a CorruptModel naming it."""
    candidates = [directory / n for n in ("model.safetensors", "model.pt", "pytorch_model.bin")]
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        raise MissingResource(
            f"no PyTorch weights in {directory}: put one of "
            f"{', '.join(p.name for p in candidates)} there"
        )
    check_weights_file(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            import torch

            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - safetensors, pickle and zip raise many types
        raise _corrupt(
            path, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    if not isinstance(state, dict):
        raise _corrupt(path, f"holds a {type(state).__name__}, not a state dict of tensors")
    return state, path


def fit_state_dict(model, state: dict, path: Path) -> None:
    """Load `state` into the torch `model`; missing, unexpected or wrongly-shaped tensors are a
    CorruptModel naming the file, the tensors and both shapes."""
    own = model.state_dict()
    wrong = [
        f"{k} {list(v.shape)} (model: {list(own[k].shape)})"
        for k, v in state.items()
        if k in own and hasattr(v, "shape") and tuple(v.shape) != tuple(own[k].shape)
    ]
    missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in own]
    if wrong or missing or unexpected:
        parts = [
            f"{label} {items[:3]}{' ...' if len(items) > 3 else ''}"
            for label, items in (
                ("wrong shape", wrong),
                ("missing", missing),
                ("unexpected", unexpected),
            )
            if items
        ]
        raise CorruptModel(
            f"weights file {path} does not fit {type(model).__name__}: {'; '.join(parts)}"
        )
    model.load_state_dict(state, strict=False)


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
            f"{destination} as described in data/weights/README.md"
        )
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=hub_id, local_dir=str(destination), allow_patterns=HUB_PATTERNS)
    except Exception as exc:  # noqa: BLE001 - network, offline mode, missing repo: all one answer
        raise MissingResource(
            f"could not download {hub_id} for {model} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); fetch-weights needs internet access "
            "to huggingface.co"
        ) from exc
    (destination / HUB_MARKER).write_text(hub_id + "\n")
    return destination
