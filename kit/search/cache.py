"""Search decisions cached once per row and hardware: keyed by the model (name, weights, size,
seed), the published precision and batch size, the hardware fingerprint and the software versions.

A decision is stored with its whole probe table under outputs/cache/search/. A changed key (another
CPU, a new torch, ONNX Runtime (CPU or GPU build), TensorRT, OpenVINO or NNCF, a new search version)
finds no file and searches again; `force` searches again whatever is stored. A decision made by a
quick search serves quick lookups only; a full search's decision serves both. A decision searched on
a contended machine (load average above the cores) is reused only while the machine is still
contended: once it is quiet, the row is searched again, so a choice that only contention favoured
(fewer threads) does not outlive it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kit import atomic
from kit.errors import KitError
from kit.hardware import kinds
from kit.hardware.environment import (
    TENSORRT_DISTRIBUTIONS,
    cpu_flags,
    cpu_model,
    package_versions,
    usable_cores,
    usable_cpus,
)
from kit.paths import cache_dir
from kit.precision import PublishedPrecision
from kit.search.decision import Decision

# bump when candidates, gates or the choice rule change (16: GPU candidates, per-batch GPU search;
SEARCH_VERSION = 21
#: 17: a GPU's torch eager candidates only as fallbacks of the CUDA-graph ones; 18: a probe the
#: sibling row stopped early is taken as lost only where what stopped it may run this row too;
#: 19: a CPU without VNNI/AMX quantises int8 to 7-bit weights, so its int8 candidates' numerics
#: and speed changed, and the default threads are one per physical core; 20: where the published
#: batch is 8x the search batch or more, every challenger in the window is dueled, one within 30 %
#: is settled at the published batch; 21: ... or, where a round there does not fit its time, at the
#: largest batch that fits, 8x the search batch or more)
#: not bumped for a quick search measuring fewer fallbacks (a GPU's bf16 and ONNX Runtime eager
#: candidates): a decision cached before measured a superset of them and still holds; nor for a
#: full GPU search losing its reduce-overhead candidate with 2 clients (refused at load: inductor's
#: CUDA graphs are shared by the threads), which no GPU run has measured.
#: Every distribution whose version can change which candidate wins; those not installed are left
#: out of the key (a CPU install's key is unchanged by the GPU and TensorRT names).
SOFTWARE = (
    "torch",
    "onnxruntime",
    "onnxruntime-gpu",
    *TENSORRT_DISTRIBUTIONS,
    "onnx",
    "onnxconverter-common",
    "numpy",
    "tensorflow-cpu",
    "tf2onnx",
    "transformers",
    "openvino",
    "nncf",
)
FLAG_PREFIXES = ("avx", "amx", "fma", "sse4", "f16c")
DEPTH_RANK = {"quick": 0, "full": 1}


def hardware_fingerprint(kind: str) -> dict:
    """What decides which configuration is fastest: the CPU (model, vector/matrix flags, cores) and
    what the kind itself adds (the GPUs on a CUDA host)."""
    flags = sorted(f for f in cpu_flags() if f.startswith(FLAG_PREFIXES))
    return {
        "kind": kind,
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "flags": flags,
        **kinds.get(kind).key_facts(),
    }


def software_versions() -> dict:
    return {"search": SEARCH_VERSION, **package_versions(SOFTWARE)}


def decision_key(
    model: str,
    published: str,
    batch_size: int,
    kind: str,
    *,
    weights: str = "random",
    small: bool = False,
    seed: int = 0,
) -> dict:
    return {
        "model": model,
        "weights": weights,
        "small": small,
        "seed": seed,
        "published": PublishedPrecision.parse(published),
        "batch_size": int(batch_size),
        "hardware": hardware_fingerprint(kind),
        "software": software_versions(),
    }


def key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def decision_path(key: dict, directory: Path | None = None) -> Path:
    directory = directory or cache_dir() / "search"
    name = Path(str(key["model"])).name.removesuffix(".onnx")
    return directory / f"{name}-{key['published']}-b{key['batch_size']}-{key_hash(key)}.json"


def contended(load_average: float, cpus: int) -> bool:
    """A machine whose 1-minute load average exceeds its usable CPUs: other work shares every CPU,
    which favours fewer threads and blurs small differences."""
    return load_average > cpus


ANY = object()  # load_decision's settle_batch: whatever settled the stored decision's near ties


def load_decision(
    key: dict,
    depth: str = "quick",
    directory: Path | None = None,
    load_now: float | None = None,
    settle_batch: int | None | object = ANY,
) -> Decision | None:
    """The stored decision for `key` made at `depth` or deeper, or None (absent, unreadable, made
    for another key, made with another `settle_batch` than asked (a GPU decides each batch on its
    own, a CPU settles a near tie at the largest batch: one made the other way is not this job's),
    or searched on a contended machine that is quiet now: then it is searched again)."""
    path = decision_path(key, directory)
    try:
        stored = Decision.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        # unreadable, not a decision (no plan), an unknown backend
        return None
    if stored.key != key or DEPTH_RANK.get(stored.depth, -1) < DEPTH_RANK[depth]:
        return None
    if (
        settle_batch is not ANY
        and stored.settings.get("settle_batch", settle_batch) != settle_batch
    ):
        return None
    now = os.getloadavg()[0] if load_now is None else load_now
    if stored.contended and not contended(now, usable_cpus()):
        return None
    return stored


def store_decision(decision: Decision, directory: Path | None = None) -> Path:
    """Write atomically (temporary file, then rename): a concurrent reader sees the old or the
    new."""
    if decision.key is None:
        raise KitError(f"search decision for {decision.model!r} has no cache key: not stored")
    path = decision_path(decision.key, directory)
    return atomic.write_text(path, json.dumps(decision.to_dict(), indent=1, default=str))
