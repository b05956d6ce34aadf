"""`make bench`: run every benchmark module in turn; each prints its ratios.

Benchmarks compare within one run (ratios), never against fixed times: these machines are noisy.
"""

from __future__ import annotations

import importlib
import os
import sys

# module names under benchmarks/, each with main() -> int
BENCHMARKS: list[str] = [
    "harness_overhead",
    "backend_speedups",
    "power_overhead",
    "ipu_overhead",
    "batch_dask_overhead",
    "row_search",
    "memory",
]


# `--smoke`: each benchmark once at its smallest (the zoo's small models, one or two short rounds,
# one cheap row or job); the tests run it so that a benchmark that no longer runs fails `make test`.
# Its figures mean nothing.
SMOKE_ENV = {
    "BENCH_SMALL": "1",
    "BENCH_ROUNDS": "2",
    "BENCH_SECONDS": "0.05",
    "BENCH_BATCH": "1",
    "POWER_BENCH_ROUNDS": "2",
    "POWER_BENCH_SECONDS": "0.05",
    "BENCH_IPU_ROUNDS": "1",
    "BENCH_IPU_CALLS": "2",
    "BATCH_ONLY": "published",
    "BENCH_ROWS": "resnet50-torch-fp32:FP16",
    "BENCH_SEARCH_DEPTH": "quick",
    "BENCH_MEMORY_MODELS": "resnet50-torch-fp32",
    "BENCH_MEMORY_SMALL": "1",
    "BENCH_STRICT": "0",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--smoke"]):
        print(
            f"usage: python -m benchmarks.run_all [--smoke]; got {' '.join(argv)!r}",
            file=sys.stderr,
        )
        return 2
    if argv:
        os.environ.update(SMOKE_ENV)
    failures = 0
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        failures += bool(importlib.import_module(f"benchmarks.{name}").main())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
