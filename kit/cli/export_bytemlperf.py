"""`kit export-bytemlperf RESULT.json...`: ByteMLPerf reports of model benchmark results
(kit.publish.bytemlperf_export), for results older than the export every run now writes."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.publish.bytemlperf_export import export_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-bytemlperf",
        help="write ByteMLPerf reports of model benchmark results (every run "
        "already does; for older results)",
    )
    p.add_argument(
        "results", type=Path, nargs="+", help="result JSON files (outputs/runs/<run_id>/<job>.json)"
    )
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    for path in args.results:
        written = export_file(path)
        print(f"{path}: {written or 'not a model benchmark with measurements: nothing to export'}")
    return 0
