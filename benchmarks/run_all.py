"""`make bench`: run every benchmark module in turn; each prints its ratios.

Benchmarks compare within one run (ratios), never against fixed times: these machines are noisy.
"""

from __future__ import annotations

import importlib
import sys

# module names under benchmarks/, each with main() -> int
BENCHMARKS: list[str] = ["harness_overhead", "backend_speedups", "power_overhead", "ipu_overhead",
                         "batch_dask_overhead", "row_search", "memory"]


def main() -> int:
    failures = 0
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        failures += bool(importlib.import_module(f"benchmarks.{name}").main())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
