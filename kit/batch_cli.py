"""`kit reproduce` and `kit site`."""

from __future__ import annotations

import argparse
import sys
import time

from kit.batch import JobRecord, run_jobs
from kit.paths import outputs_dir
from kit.profiles import HARDWARE, PROFILES, jobs_for, resolve_hardware
from kit.site import rebuild_index, write_index


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="run every study notebook into outputs/ and write the index")
    p.add_argument("--profile", choices=PROFILES, default="quick")
    p.add_argument("--hardware", choices=HARDWARE, default="auto")
    p.add_argument("--force", action="store_true", help="re-run notebooks even if nothing changed")
    p.add_argument("--only", default="", help="comma-separated job names (substring match)")
    p.set_defaults(func=reproduce)
    s = sub.add_parser("site", help="rebuild outputs/index.html from the results")
    s.set_defaults(func=lambda args: print(rebuild_index()) or 0)


def reproduce(args: argparse.Namespace) -> int:
    hardware = resolve_hardware(args.hardware)
    jobs = jobs_for(args.profile, hardware, research=args.force)
    if args.only:
        wanted = args.only.split(",")
        jobs = [j for j in jobs if any(w in j.name for w in wanted)]
    started = time.perf_counter()
    bar = Progress(len(jobs))
    records = run_jobs(jobs, force=args.force, context=f"{args.profile}|{hardware}", progress=bar)
    bar.close()
    index = write_index([r.to_dict() for r in records], profile=args.profile, hardware=hardware)
    failed = [r for r in records if r.status != "ok"]
    print(f"{len(records)} notebooks in {time.perf_counter() - started:.0f} s: "
          f"{len(records) - len(failed)} ok, {len(failed)} not ok")
    for r in failed:
        print(f"  {r.name}: {r.status}: {r.message}")
    print(f"index: {index}")
    print(f"outputs: {outputs_dir()}")
    return 0


class Progress:
    """A tqdm bar over notebooks, one line per finished notebook."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="notebook", file=sys.stdout, dynamic_ncols=True)

    def __call__(self, record: JobRecord) -> None:
        tag = "reused" if record.reused else f"{record.duration_s:.0f} s"
        self.bar.write(f"{record.status:>7}  {record.name} ({tag}){': ' + record.message if record.message else ''}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
