"""`kit import-bytemlperf DIR`: ByteMLPerf reports of any vendor into the scorecard's columns.

Every `<Backend>/<model>/result[-<precision>].json` under DIR is checked (a bad file stops the
import, naming the file and field) and copied to outputs/imported/bytemlperf/ (or `--into`); the
scorecard then shows each backend's figures beside its rows, each with the file it came from.
IPU reports are checked against the figures the kit holds in data/published/, which stays the
only source of the published figures it judges against.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from kit.publish.imported_reports import (
    check_against_published,
    figures,
    import_reports,
    imported_dir,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-bytemlperf",
        help="import ByteMLPerf report folders (any vendor) as further "
        "published columns of the scorecard",
    )
    p.add_argument(
        "source",
        type=Path,
        help="a ByteMLPerf reports folder (general_perf/reports/ or one "
        "vendor's <Backend>/ folder)",
    )
    p.add_argument(
        "--into",
        type=Path,
        default=None,
        help=f"where the reports are kept (default {imported_dir()}, the folder the scorecard "
        "reads)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    into = args.into or imported_dir()
    copies = import_reports(args.source, into)
    found = figures(into)
    found = found[found["source"].isin({str(c) for c in copies})]
    per_backend = Counter(c.parent.parent.name for c in copies)
    print(
        f"imported {len(copies)} reports "
        f"({', '.join(f'{b} {n}' for b, n in sorted(per_backend.items()))}), {len(found)} figures, "
        f"into {into}"
    )
    if "IPU" in per_backend:
        same, problems = check_against_published(found)
        print(
            f"IPU: {same} figures equal to data/published/bytemlperf_ipu_reports.csv"
            + (f"; {len(problems)} differ:" if problems else " (every figure the kit holds)")
        )
        for line in problems:
            print(f"  {line}")
    if args.into is not None and Path(args.into).resolve() != imported_dir().resolve():
        print(f"note: the scorecard reads {imported_dir()}; these reports are kept in {into} only")
    else:
        print(
            "the scorecard shows them beside its rows once the summary runs again: "
            "`make reproduce ONLY=summary` (or the next `make reproduce`)"
        )
    return 0
