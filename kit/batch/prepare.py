"""The exports a batch's jobs will load, made side by side before its first timed job.

Each job exports its own model when no export is cached: one after another, at the start of each
job. On a machine with cores and memory to spare, the local executor first makes every missing
full-size export in parallel (each in its own child process, kit.models.export_child), so the jobs
then find them cached; nothing is timed meanwhile. How many at once: one per core, and as many as
fit in 80 % of the available memory at the largest export's expected peak (kit.measure.memory);
fewer than two, and nothing is done here (the jobs export as before). An export is partly one
thread (tracing) and partly many (its ONNX Runtime check): on this 2-core EPYC, resnet50, ALBERT,
BERT and RoBERTa took 62.9 s one after another and 39.0 s two at a time. An export that fails here
is left to its job, which exports again and reports why.

Run as `python -m kit.batch.prepare REQUESTS_JSON WORKERS`; it prints one JSON line per export,
and one per cache entry it discarded (`note`, which the batch prints on its console).
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kit.batch.worker import watch_parent
from kit.cache import CacheRebuilt
from kit.errors import KitError
from kit.hardware.environment import usable_cores
from kit.measure.memory import available_bytes
from kit.models import MODELS
from kit.models.export_child import exit_on_sigterm
from kit.models.requests import ExportRequest
from kit.studies import STUDIES

MEMORY_SHARE = 0.8  # of the available memory the exports side by side may take


@dataclass(frozen=True)
class Prepared:
    """What a prepare step did: the exports it made, failed, and how long it took."""

    made: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    parallel: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        if not self.made and not self.failed:
            return ""
        failed = (
            f"; failed here, left to their jobs: {', '.join(self.failed)}" if self.failed else ""
        )
        return (
            f"exported {len(self.made)} model(s) to ONNX side by side before the first job "
            f"({self.parallel} at a time, {self.seconds:.0f} s){failed}"
        )

    def to_dict(self) -> dict:
        return {
            "made": list(self.made),
            "failed": list(self.failed),
            "parallel": self.parallel,
            "seconds": self.seconds,
        }


def missing_exports(jobs: Iterable) -> list[ExportRequest]:
    """The full-size zoo exports the jobs will load that are not cached, each once."""
    return [r for r in export_requests(jobs) if not r.cached()]


def export_requests(jobs: Iterable) -> list[ExportRequest]:
    """The full-size zoo exports the jobs will load, each once (a job whose parameters do not make
    a config, or name no zoo model, asks for nothing: it fails on its own)."""
    wanted: dict[ExportRequest, None] = {}
    for job in jobs:
        study = Path(job.notebook).stem
        if study not in STUDIES:
            continue
        try:
            requests = STUDIES.get(study).config.from_params(job.parameters).exports()
        except (KitError, TypeError, ValueError):
            continue
        wanted.update(
            dict.fromkeys(r for r in requests if not r.small and r.model in MODELS.names())
        )
    return list(wanted)


def parallel_exports(
    requests: list[ExportRequest], cores: int | None = None, available: float | None = None
) -> int:
    """How many of `requests` to export at once: one per core, and as many as fit in MEMORY_SHARE
    of the available memory at the largest one's expected peak; at most one per request."""
    if not requests:
        return 0
    cores = usable_cores() if cores is None else cores
    available = available_bytes() if available is None else available
    largest = max(r.need_bytes() for r in requests)
    return max(0, min(len(requests), cores, math.floor(MEMORY_SHARE * available / largest)))


def export_all(requests: list[ExportRequest], workers: int) -> list[dict]:
    """Each request exported (or found cached), `workers` at a time; one record per request, in
    order: {'model', 'seconds', 'error' (None when it worked)}."""

    def one(request: ExportRequest) -> dict:
        started = time.perf_counter()
        try:
            request.export()
            error = None
        except Exception as exc:  # noqa: BLE001 - one failed export never stops the others
            error = (
                f"{type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            )
        record = {
            "model": request.model,
            "seconds": round(time.perf_counter() - started, 1),
            "error": error,
        }
        print(json.dumps(record), flush=True)
        return record

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, requests))


def prepared(records: list[dict], parallel: int, seconds: float) -> Prepared:
    return Prepared(
        tuple(r["model"] for r in records if not r["error"]),
        tuple(f"{r['model']} ({r['error']})" for r in records if r["error"]),
        parallel,
        round(seconds, 1),
    )


def relay_cache_notes() -> None:
    """A cache entry discarded here (kit.cache.CacheRebuilt) is printed as a JSON line
    {'note': ...}: this process's stderr is not the console, the batch prints it there."""
    show = warnings.showwarning

    def relay(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, CacheRebuilt):
            # one write: threads
            print(json.dumps({"note": str(message)}) + "\n", end="", flush=True)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = relay


def main(argv: list[str]) -> int:
    watch_parent()
    exit_on_sigterm()
    relay_cache_notes()
    requests = [ExportRequest(**r) for r in json.loads(argv[0])]
    export_all(requests, int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
