"""`kit fetch-data NAME` (opt-in download) and `kit datasets` (what is present)."""

from __future__ import annotations

import argparse

from kit.datasets.fetch import DEFAULT_TIMEOUT_S, SOURCES, fetch
from kit.datasets.registry import DATASETS
from kit.paths import datasets_dir


def register(subparsers) -> None:
    p = subparsers.add_parser("fetch-data", help="download a published dataset (needs internet)")
    p.add_argument("name", choices=SOURCES.names())
    p.add_argument("--dest", help="target folder (default data/datasets/NAME)")
    p.add_argument("--sha256", help="expected sha256 of the download (pins an unpinned source)")
    p.add_argument("--url", help="a mirror of the published file")
    p.add_argument(
        "--accept-unpinned",
        action="store_true",
        help="download a file that has no published checksum, unverified (its sha256 is recorded)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for the server on each read (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.set_defaults(func=_fetch)
    q = subparsers.add_parser(
        "datasets", help="list the datasets and whether their files are present"
    )
    q.set_defaults(func=_list)


def _fetch(args: argparse.Namespace) -> int:
    fetch(
        args.name,
        args.dest,
        sha256=args.sha256,
        url=args.url,
        timeout=args.timeout,
        accept_unpinned=args.accept_unpinned,
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    for name in DATASETS.names():
        root = datasets_dir() / name
        if DATASETS.get(name).generated_from_specs:
            state = "generated from the model's inputs"
        else:
            problem = DATASETS.get(name).missing(root)
            state = f"missing: {problem}" if problem else "present"
        print(f"{name:14s} {state:45s} {root}")
    return 0
