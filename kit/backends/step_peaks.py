"""Peak memory measured on this host for steps whose cost no table here can give: the IPU (PopRT)
conversion and compilation, which need the Poplar SDK.

`kit.measure.memory.STEP_COSTS` holds ratios measured by `make bench` for the steps this kit runs
anywhere. PopRT's steps only run on an IPU host, so their first run there is measured (the worker's
VmHWM per step, and its RSS before the step) and recorded in `cache/memory/step_peaks.json`; later
runs on that host check each step's expected addition against the memory available before it starts.
A worker killed during a load is recorded too, at the last peak read (a lower bound), so the next
run of that model is checked instead of killed again. A step with no comparable measurement is not
checked, and the result says so: a guessed ratio could refuse a run that fits or pass one that does
not.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from kit.atomic import write_text
from kit.measure.memory import GB
from kit.paths import cache_dir

KEEP = 50  # observations per step (the newest)
STORE_ENV = "KIT_STEP_PEAKS"  # another file for the store (the tests' double uses its own)


def store_path() -> Path:
    return Path(os.environ.get(STORE_ENV) or cache_dir() / "memory" / "step_peaks.json")


@dataclass(frozen=True)
class Observation:
    model: str
    model_bytes: int
    peak_bytes: int  # the process's peak during the step
    added_bytes: int  # what the step added: the peak less the RSS before it
    context: str  # e.g. "PopRT 1.4.0, fp16, batch 4"


def load(path: Path | None = None) -> dict[str, list[Observation]]:
    """The store; unreadable files and rows of another format are left out, never an error."""
    path = path or store_path()
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    store = {}
    for step, rows in raw.items():
        kept = []
        for row in rows if isinstance(rows, list) else []:
            try:
                kept.append(Observation(**row))
            except TypeError:
                continue
        store[step] = kept
    return store


def record(step: str, observation: Observation, path: Path | None = None) -> None:
    """Add one measured peak (two runs at once: the file lock keeps both)."""
    path = path or store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        store = load(path)
        store[step] = [*store.get(step, []), observation][-KEEP:]
        write_text(
            path, json.dumps({k: [o.__dict__ for o in v] for k, v in store.items()}, indent=1)
        )


def need(step: str, model: str, model_bytes: float, path: Path | None = None) -> dict | None:
    """{"bytes", "source"}: what `step` is expected to add to the worker's memory. The most it added
    for this same model file on this host; else the highest added / file ratio among models at least
    half this size, times this file (never scaled up from much smaller models, whose fixed costs
    would dominate); None when neither exists (the step then runs unchecked, and says so)."""
    rows = [o for o in load(path).get(step, []) if o.model_bytes > 0 and o.added_bytes >= 0]
    same = [o for o in rows if o.model == model and o.model_bytes == model_bytes]
    rows = [o for o in rows if o.added_bytes > 0]
    if same:
        worst = max(same, key=lambda o: o.added_bytes)
        return {
            "bytes": float(worst.added_bytes),
            "source": f"what this step added for {model} before on this host: "
            f"{worst.added_bytes / GB:.2f} GB, {worst.context}",
        }
    comparable = [o for o in rows if o.model_bytes >= model_bytes / 2]
    if not comparable:
        return None
    worst = max(comparable, key=lambda o: o.added_bytes / o.model_bytes)
    ratio = worst.added_bytes / worst.model_bytes
    return {
        "bytes": ratio * model_bytes,
        "source": f"{ratio:.1f} x the ONNX file, the highest ratio measured on this host for a "
        f"model at least half this size ({worst.model}: +{worst.added_bytes / GB:.2f} GB, "
        f"{worst.context})",
    }
