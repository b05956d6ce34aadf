"""`kit compare RUN_A RUN_B`: two runs' figures side by side (kit.publish.compare_runs), printed
and written as an HTML page under outputs/compare/."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.publish.compare_runs import compare_runs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="compare two runs' figures: intervals, ratio, significance, environment"
    )
    p.add_argument(
        "run_a", type=Path, help="result folder (outputs/runs/<run_id>/) or result .json"
    )
    p.add_argument("run_b", type=Path, help="result folder or result .json to compare with RUN_A")
    p.add_argument(
        "--out", type=Path, default=None, help="HTML page to write (default outputs/compare/...)"
    )
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    text, page = compare_runs(args.run_a, args.run_b, args.out)
    print(text)
    print(f"\nHTML: {page}")
    return 0
