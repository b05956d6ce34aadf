"""The batch through a one-worker Dask cluster against the default embedded path, in one run.

Both paths run the same quick-profile jobs (BATCH_ONLY, default a reduced set: the published
tables, one timed model, the scorecard) with force, into fresh outputs folders, alternating which
goes first in each of BENCH_ROUNDS rounds. The cluster (one worker process, one thread,
resources cpu=1) is started before the clock runs, as an existing cluster would be. Target: the
Dask path costs at most 5 % (ratio <= 1.05). BATCH_ONLY=all runs the whole quick batch.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import env_int, load_note, strict

TARGET = 1.05
DEFAULT_ONLY = "published,resnet50-torch-fp32_FP16,summary"


def batch_seconds(only: str | None, out: Path, executor=None) -> tuple[float, list[str]]:
    from kit.batch.profiles import jobs_for
    from kit.batch.runner import run_jobs
    from kit.batch.selection import select
    from kit.batch.status import JobStatus

    jobs = select(jobs_for("quick", "cpu"), only)
    started = time.perf_counter()
    records = run_jobs(jobs, force=True, out=out, context="quick|cpu", executor=executor)
    seconds = time.perf_counter() - started
    return seconds, [
        f"{r.name}={r.status} ({r.message})" for r in records if r.status != JobStatus.OK
    ]


def main() -> int:
    from distributed import Client, LocalCluster

    from kit.batch.dask_executor import DaskExecutor
    from kit.paths import outputs_dir

    only = os.environ.get("BATCH_ONLY", DEFAULT_ONLY)
    only = None if only == "all" else only
    rounds = env_int("BENCH_ROUNDS", 2)
    os.environ.setdefault("KIT_CACHE", str(outputs_dir() / "cache"))
    times: dict[str, list[float]] = {"embedded": [], "dask": []}
    environ = dict(os.environ)
    with (
        tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp,
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            resources={"cpu": 1},
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        Client(cluster) as client,
    ):
        os.environ.clear()  # the nanny set OMP_NUM_THREADS=1 (and more) here too: undo it
        os.environ.update(environ)
        for i in range(rounds):
            order = ("embedded", "dask") if i % 2 == 0 else ("dask", "embedded")
            for path in order:
                executor = DaskExecutor(client) if path == "dask" else None
                seconds, bad = batch_seconds(only, Path(tmp) / f"{path}-{i}", executor)
                times[path].append(seconds)
                print(
                    f"round {i + 1} {path:>8}: {seconds:6.1f} "
                    f"s{'  not ok: ' + ', '.join(bad) if bad else ''}",
                    flush=True,
                )
    ratios = [d / e for d, e in zip(times["dask"], times["embedded"], strict=True)]
    ratio = sum(times["dask"]) / sum(times["embedded"])
    print(
        f"batch {only or 'all (quick)'}: dask/embedded wall time {ratio:.3f} over {rounds} rounds "
        f"(per round {', '.join(f'{r:.3f}' for r in ratios)}; median "
        f"{statistics.median(ratios):.3f}); target <= {TARGET}; {load_note()}"
    )
    return 1 if strict() and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
