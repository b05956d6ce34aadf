"""The fp32 reference's outputs, computed once per export, batch and inputs.

The row's search runs ONNX Runtime fp32 on the CPU once at each batch it searches (its numerics
gate); the row's measurement then checked the chosen configuration against the same reference on
the same inputs, loading and running it again (seconds for CLIP or BERT at batch 40 on a GPU host's
CPU). The search leaves its outputs here and the measurement takes them where everything that
decides them is the same: the export file (path, size, modification time), the batch and the
inputs' bytes.

They are also kept on disk, under `outputs/cache/reference-outputs/` (`KIT_REFERENCE_CACHE`: another
folder, or 0 for none), so a later run, or another row on the same export and batch (resnet50's
FP16 and FP8 rows), reads them instead of loading and running the reference again: that is what a
warm rerun on a GPU host would otherwise spend on its CPU for every row and batch. An entry is
keyed by the export's content (sha256 of the file and of any external data file it names), the
batch, the inputs' bytes, the onnxruntime version and the CPU (model name and instruction-set flags:
ONNX Runtime's kernels differ by instruction set), and carries its size and content hash
(kit.cache): a damaged entry is deleted and computed again. The folder is kept under
FOLDER_CAP_BYTES, the least recently used entries (a read counts as a use) deleted first. A folder
that cannot be read or written costs a warning and the call the entry would have saved, never the
row.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import warnings
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit import cache
from kit.errors import InvalidParameter
from kit.hardware.environment import cpu_flags, cpu_model, onnxruntime_version
from kit.models.onnx_file import onnx_sources
from kit.models.spec import ExportedModel
from kit.paths import cache_dir, inside

KEPT = 2  # entries kept in memory: a row measures a batch right after searching it
MAX_ENTRY_BYTES = 256 * 2**20  # larger outputs are not written to disk
#: the folder's size limit: past it the least recently used entries go (a 16 GB laptop's disk)
FOLDER_CAP_BYTES = 2 * 2**30
FORMAT = 1  # of the disk entries: bump when what the reference runs changes
ENV = "KIT_REFERENCE_CACHE"
#: what a damaged or unreachable entry raises on the way in
UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)
_OUTPUTS: OrderedDict[tuple, Recalled] = OrderedDict()


@dataclass(frozen=True)
class Recalled:
    """Reference outputs computed before, and where they come from (for the numerics record)."""

    outputs: list[np.ndarray]
    source: str


def inputs_digest(inputs: dict[str, np.ndarray]) -> str:
    """A hash of the inputs' names, dtypes, shapes and bytes."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(inputs):
        array = np.ascontiguousarray(inputs[name])
        h.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        h.update(array.data)
    return h.hexdigest()


def store() -> Path | None:
    """The folder of the disk entries, or None where KIT_REFERENCE_CACHE=0 turns them off."""
    value = os.environ.get(ENV, "").strip()
    if value == "0":
        return None
    if value == "1" or not value:
        return cache_dir() / "reference-outputs"
    path = Path(value)
    if not path.is_absolute() or (path.exists() and not path.is_dir()):
        # a relative path would land in each notebook's working folder; 'off' is no folder
        raise InvalidParameter(
            ENV, value, "0 (no disk entries), 1 (the default) or an absolute folder path"
        )
    return path


def _key(model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]) -> tuple | None:
    try:
        stats = [(str(f.resolve()), *_size_and_mtime(f)) for f in onnx_sources(model.onnx_path)]
    except OSError:
        return None
    return (*stats, batch, inputs_digest(inputs))


def _size_and_mtime(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _entry(model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]) -> Path | None:
    """The disk entry's path for these inputs of this export (None: no disk entries)."""
    folder = store()
    if folder is None:
        return None
    settings = {
        "format": FORMAT,
        "export_sha256": [cache.file_digest(f) for f in onnx_sources(model.onnx_path)],
        "batch": batch,
        "inputs": inputs_digest(inputs),
        "onnxruntime": onnxruntime_version(),
        "cpu": cpu_model(),
        "cpu_flags": hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:16],
    }
    # the model's name becomes a file name: refused where it would lead out of the folder
    return inside(folder, f"{model.name}-b{batch}-{cache.content_key((), settings)}.npz")


def remember(
    model: ExportedModel,
    batch: int,
    inputs: dict[str, np.ndarray],
    outputs: list[np.ndarray],
    source: str,
) -> None:
    """Keep the reference's `outputs` for these inputs, computed by `source` (what a later reader
    names: "the search's call on the same inputs"), in memory (the oldest entry goes beyond KEPT)
    and on disk."""
    key = _key(model, batch, inputs)
    if key is None:
        return
    _OUTPUTS[key] = Recalled(outputs, source)
    _OUTPUTS.move_to_end(key)
    while len(_OUTPUTS) > KEPT:
        _OUTPUTS.popitem(last=False)
    try:
        _write(model, batch, inputs, outputs)
    except OSError as exc:  # a full disk or a read-only cache costs the next run a call, no more
        warnings.warn(
            f"the fp32 reference's outputs were not kept on disk ({exc}): a later run computes "
            "them again",
            stacklevel=2,
        )


def _write(
    model: ExportedModel, batch: int, inputs: dict[str, np.ndarray], outputs: list[np.ndarray]
) -> None:
    arrays = [np.asarray(o) for o in outputs]
    entry = _entry(model, batch, inputs)
    if entry is None or sum(a.nbytes for a in arrays) > MAX_ENTRY_BYTES:
        return
    if cache.read_entry(entry) is not None:
        return
    buffer = io.BytesIO()
    np.savez(buffer, *arrays)
    with cache.building(entry) as tmp:
        tmp.write_bytes(buffer.getvalue())
        meta = {"model": model.name, "export": str(model.onnx_path), "batch": batch}
        cache.commit(tmp, entry, {**meta, "outputs": len(arrays)})
    for gone in cache.prune_oldest(entry.parent, "*.npz", FOLDER_CAP_BYTES):
        cache.meta_path(gone).unlink(missing_ok=True)


def recall(model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]) -> Recalled | None:
    """The reference's outputs for exactly these inputs of this export, where already computed:
    by this process, else by an earlier call kept on disk."""
    key = _key(model, batch, inputs)
    if key is None:
        return None
    if key in _OUTPUTS:
        return _OUTPUTS[key]
    try:
        return _read(model, batch, inputs)
    except UNREADABLE as exc:
        warnings.warn(
            f"the fp32 reference's outputs kept on disk could not be read ({exc}): computing "
            "them again",
            stacklevel=2,
        )
        return None


def _read(model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]) -> Recalled | None:
    entry = _entry(model, batch, inputs)
    meta = None if entry is None else cache.read_entry(entry)
    if entry is None or meta is None:
        return None
    try:
        with np.load(entry, allow_pickle=False) as stored:
            outputs = [stored[f"arr_{i}"] for i in range(int(meta["outputs"]))]
    except UNREADABLE as exc:
        cache.discard(entry, f"is unreadable ({type(exc).__name__}: {exc})")
        return None
    with contextlib.suppress(OSError):  # used now: the folder's cap deletes the least recently used
        os.utime(entry)
    return Recalled(outputs, f"an earlier call on the same export and inputs, {entry}")


def forget() -> None:
    """Drop what this process keeps in memory (the disk entries stay)."""
    _OUTPUTS.clear()
