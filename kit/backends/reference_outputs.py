"""The fp32 reference's outputs, computed once per model, batch and inputs in a process.

The row's search runs ONNX Runtime fp32 on the CPU once at each batch it searches (its numerics
gate); the row's measurement then checked the chosen configuration against the same reference on
the same inputs, loading and running it again (seconds for CLIP or BERT at batch 40 on a GPU host's
CPU). The search leaves its outputs here and the measurement takes them where everything that
decides them is the same: the export file (path, size, modification time), the batch and the
inputs' bytes.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from kit.models.spec import ExportedModel

KEPT = 2  # entries kept: a row measures a batch right after searching it
_OUTPUTS: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()


def inputs_digest(inputs: dict[str, np.ndarray]) -> str:
    """A hash of the inputs' names, dtypes, shapes and bytes."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(inputs):
        array = np.ascontiguousarray(inputs[name])
        h.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        h.update(array.data)
    return h.hexdigest()


def _key(model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]) -> tuple | None:
    try:
        stat = model.onnx_path.stat()
    except OSError:
        return None
    return (
        str(model.onnx_path.resolve()),
        stat.st_size,
        stat.st_mtime_ns,
        batch,
        inputs_digest(inputs),
    )


def remember(
    model: ExportedModel, batch: int, inputs: dict[str, np.ndarray], outputs: list[np.ndarray]
) -> None:
    """Keep the reference's `outputs` for these inputs (the oldest entry goes beyond KEPT)."""
    key = _key(model, batch, inputs)
    if key is None:
        return
    _OUTPUTS[key] = outputs
    _OUTPUTS.move_to_end(key)
    while len(_OUTPUTS) > KEPT:
        _OUTPUTS.popitem(last=False)


def recall(
    model: ExportedModel, batch: int, inputs: dict[str, np.ndarray]
) -> list[np.ndarray] | None:
    """The reference's outputs for exactly these inputs of this export, where already computed."""
    key = _key(model, batch, inputs)
    return None if key is None else _OUTPUTS.get(key)


def forget() -> None:
    _OUTPUTS.clear()
