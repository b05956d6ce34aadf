"""Peak memory measured on this host for steps whose cost no table here can give: the IPU (PopRT)
conversion and compilation, which need the Poplar SDK.

`kit.memory.STEP_COSTS` holds ratios measured by `make bench` for the steps this kit runs anywhere.
PopRT's steps only run on an IPU host, so their first run there is measured (the worker's VmHWM per
step) and recorded in `cache/memory/step_peaks.json`; every later run on that host checks each step
against the memory available before it starts. A step with no measurement yet is not checked, and
the result says so: a guessed ratio could refuse a run that fits or pass one that does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kit.atomic import write_text
from kit.memory import GB
from kit.paths import cache_dir

KEEP = 50  # observations per step (the newest)
LARGE_MODEL = 100e6  # bytes: above this, a step's fixed footprint no longer inflates its ratio


def store_path() -> Path:
    return cache_dir() / "memory" / "step_peaks.json"


@dataclass(frozen=True)
class Observation:
    model: str
    model_bytes: int
    peak_bytes: int
    context: str  # e.g. "PopRT 1.4.0, fp16, batch 4"


def load(path: Path | None = None) -> dict[str, list[Observation]]:
    path = path or store_path()
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {step: [Observation(**o) for o in rows if isinstance(o, dict)] for step, rows in raw.items()
            if isinstance(rows, list)}


def record(step: str, observation: Observation, path: Path | None = None) -> None:
    """Add one measured peak (two runs at once: the file lock keeps both)."""
    from filelock import FileLock

    path = path or store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        store = load(path)
        store[step] = [*store.get(step, []), observation][-KEEP:]
        write_text(path, json.dumps({k: [o.__dict__ for o in v] for k, v in store.items()}, indent=1))


def need(step: str, model_bytes: float, path: Path | None = None) -> dict | None:
    """{"bytes", "source"}: the highest peak / ONNX file ratio measured here for `step` (over models
    of at least 100 MB where there are any) times this model's size; None before any measurement."""
    rows = [o for o in load(path).get(step, []) if o.model_bytes > 0 and o.peak_bytes > 0]
    large = [o for o in rows if o.model_bytes >= LARGE_MODEL]
    rows = large or rows
    if not rows:
        return None
    worst = max(rows, key=lambda o: o.peak_bytes / o.model_bytes)
    ratio = worst.peak_bytes / worst.model_bytes
    return {"bytes": ratio * model_bytes,
            "source": f"{ratio:.1f} x the ONNX file, the highest ratio measured on this host "
                      f"({worst.model}: {worst.peak_bytes / GB:.2f} GB, {worst.context})"}
