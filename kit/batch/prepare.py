"""What a batch's jobs will load, made side by side before its first timed job: the exports, then
the torch.compile candidates their searches will probe.

Each job exports its own model when no export is cached: one after another, at the start of each
job. On a machine with cores and memory to spare, the local executor first makes every missing
full-size export in parallel (each in its own child process, kit.models.export_child), so the jobs
then find them cached; nothing is timed meanwhile. How many at once: one per core, and as many as
fit in 80 % of the available memory at the largest export's expected peak (kit.measure.memory);
fewer than two, and nothing is done here (the jobs export as before). An export is partly one
thread (tracing) and partly many (its ONNX Runtime check): on this 2-core EPYC, resnet50, ALBERT,
BERT and RoBERTa took 62.9 s one after another and 39.0 s two at a time. An export that fails here
is left to its job, which exports again and reports why.

Then, where the searches will probe torch.compile candidates (a GPU's), each is compiled once in a
child process of its own (kit.search.ahead), several at once: one per CORES_PER_COMPILE cores (a
compile is mostly one Python thread, with inductor's kernel compiles on a few more, which each
child is given: TORCHINDUCTOR_COMPILE_THREADS), and as many as fit in 80 % of the available memory
at the largest one's export's expected peak (a compile builds the same fp32 model and a copy, as
an export does; not yet measured apart), and as many as fit in 80 % of the GPU's free memory at
that peak (nvidia-smi's figure, other processes' use counted); fewer than two, and the jobs compile
their own. The jobs'
searches then read the graphs from inductor's caches. A compile that fails here is left to its job.

Run as `python -m kit.batch.prepare exports|compiles REQUESTS_JSON WORKERS`; it prints one JSON
line per export or compile, and one per cache entry it discarded (`note`, which the batch prints on
its console).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kit.batch.proctree import kill_tree
from kit.batch.worker import watch_parent
from kit.cache import CacheRebuilt
from kit.errors import KitError, error_line
from kit.hardware.environment import usable_cores, usable_cpus
from kit.measure.memory import available_bytes
from kit.models import MODELS
from kit.models.export_child import exit_on_sigterm
from kit.models.requests import ExportRequest
from kit.search.ahead import CompileRequest
from kit.studies import STUDIES

MEMORY_SHARE = 0.8  # of the available memory the exports (or compiles) side by side may take
CORES_PER_COMPILE = 4  # cores each compile ahead is planned to keep busy
COMPILE_LIMIT_S = 900.0  # one compile ahead; past it, it is killed and left to its job


class Step(StrEnum):
    """A prepare step: what it makes; the value is the child's first argument."""

    EXPORTS = "exports"
    COMPILES = "compiles"

    @property
    def record_name(self) -> str:
        """The key that names each of its records (an export's model, a compile's label)."""
        return "model" if self is Step.EXPORTS else "label"

    @property
    def run_key(self) -> str:
        """Where the batch's run file (runs/<id>/batch.run) keeps what it made."""
        return "prepared" if self is Step.EXPORTS else "compiled_ahead"

    def made(self, n: int) -> str:
        if self is Step.EXPORTS:
            return f"exported {n} model(s) to ONNX side by side before the first job"
        return (
            f"compiled {n} torch.compile candidate(s) side by side before the first job, for the "
            "searches to read from inductor's caches"
        )


@dataclass(frozen=True)
class Prepared:
    """What a prepare step did: what it made, failed, and how long it took."""

    made: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    parallel: int = 0
    seconds: float = 0.0
    step: Step = Step.EXPORTS

    def summary(self) -> str:
        if not self.made and not self.failed:
            return ""
        failed = (
            f"; failed here, left to their jobs: {', '.join(self.failed)}" if self.failed else ""
        )
        return (
            self.step.made(len(self.made))
            + f" ({self.parallel} at a time, {self.seconds:.0f} s){failed}"
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
    wanted = dict.fromkeys(
        r for r in asked(jobs, "exports") if not r.small and r.model in MODELS.names()
    )
    return list(wanted)


def compile_requests(jobs: Iterable, exported_only: bool = True) -> list[CompileRequest]:
    """The torch.compile candidates the jobs' searches will probe on full-size models, each once
    (the FP8 row's shared ones are its FP16 row's), where its export is cached (else its job
    exports it first; `exported_only` False: those too, as a plan counts them)."""
    wanted = dict.fromkeys(
        r
        for r in asked(jobs, "compiles")
        if not r.export.small and (r.export.cached() or not exported_only)
    )
    return list(wanted)


def asked(jobs: Iterable, what: str) -> Iterator:
    """What each job's study config asks for beforehand (its `exports()` or `compiles()`); a job
    whose parameters make no config, or whose config cannot say, asks for nothing: it fails on its
    own, with its reason, when it runs."""
    for job in jobs:
        study = Path(job.notebook).stem
        if study not in STUDIES:
            continue
        try:
            yield from getattr(STUDIES.get(study).config.from_params(job.parameters), what)()
        except (KitError, TypeError, ValueError):
            continue


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


def parallel_compiles(
    requests: list[CompileRequest],
    cores: int | None = None,
    available: float | None = None,
    device_free: float | None = None,
) -> int:
    """How many of `requests` to compile at once: one per CORES_PER_COMPILE cores, and as many as
    fit in MEMORY_SHARE of the available memory at the largest one's export's expected peak, and,
    given the GPU's free memory (`device_free`), as many as fit in MEMORY_SHARE of it at the same
    peak (each child holds its model on the device, as an export holds it on the host: a stand-in,
    not measured apart); at most one per request."""
    if not requests:
        return 0
    cores = usable_cores() if cores is None else cores
    available = available_bytes() if available is None else available
    largest = max(r.export.need_bytes() for r in requests)
    memories = (available, device_free)
    fits = [math.floor(MEMORY_SHARE * m / largest) for m in memories if m is not None]
    return max(0, min(len(requests), cores // CORES_PER_COMPILE, *fits))


def compile_all(requests: list[CompileRequest], workers: int) -> list[dict]:
    """Each request compiled in a child process of its own (kit.search.ahead), `workers` at a
    time, each with its share of the cores for inductor's kernel compiles; one record per request,
    in order: {'label', 'seconds', 'compile_s', 'compile_cache', 'peak_rss_bytes', 'error'}."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, usable_cpus() // max(1, workers))),
    }

    def one(request: CompileRequest) -> dict:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "kit.search.ahead", json.dumps(request.to_dict())],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its group: kill_tree reaches workers it starts late too
        )
        try:
            out, err = proc.communicate(timeout=COMPILE_LIMIT_S)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)  # inductor's compile workers with it
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=10)
            out, err = "", f"not done in {COMPILE_LIMIT_S:g} s: killed"
        record = last_record(out)
        if record is None:
            tail = err.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            record = {"error": f"its child ended without a record ({tail[0][:300]})"}
        record["label"] = request.label
        record.setdefault("seconds", round(time.perf_counter() - started, 1))
        print(json.dumps(record), flush=True)
        return record

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, requests))


def last_record(output: str) -> dict | None:
    """The last JSON object a child printed on its own line, or None."""
    for line in reversed(output.splitlines()):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                return record
    return None


def export_all(requests: list[ExportRequest], workers: int) -> list[dict]:
    """Each request exported (or found cached), `workers` at a time; one record per request, in
    order: {'model', 'seconds', 'error' (None when it worked)}."""

    def one(request: ExportRequest) -> dict:
        started = time.perf_counter()
        try:
            request.export()
            error = None
        except Exception as exc:  # noqa: BLE001 - one failed export never stops the others
            error = error_line(exc)
        record = {
            "model": request.model,
            "seconds": round(time.perf_counter() - started, 1),
            "error": error,
        }
        print(json.dumps(record), flush=True)
        return record

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, requests))


def prepared(
    records: list[dict], parallel: int, seconds: float, step: Step = Step.EXPORTS
) -> Prepared:
    name = step.record_name
    return Prepared(
        tuple(r[name] for r in records if not r["error"]),
        tuple(f"{r[name]} ({r['error']})" for r in records if r["error"]),
        parallel,
        round(seconds, 1),
        step,
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
    step, requests, workers = Step(argv[0]), json.loads(argv[1]), int(argv[2])
    if step is Step.COMPILES:
        compile_all([CompileRequest.from_dict(r) for r in requests], workers)
    else:
        export_all([ExportRequest(**r) for r in requests], workers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
