"""`kit reproduce`, `kit site`, `kit rebuild-state` and `kit clean-outputs`.

`kit reproduce` exits 0 when every job is ok, 1 when any is not (its last line names them), 2
for usage and environment errors (bad ONLY/FORCE, a busy, corrupt, read-only or full outputs/, an
unreachable scheduler), 128+N when stopped by signal N.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from kit.backends import reference_outputs
from kit.backends.openvino_backend import blob_cache_gb
from kit.batch.clean import clean_outputs
from kit.batch.dask_executor import DaskExecutor
from kit.batch.interrupts import BatchInterrupted
from kit.batch.jobs import WARM_MODES, Job, JobRecord
from kit.batch.lock import outputs_lock
from kit.batch.past_runs import last_measured
from kit.batch.profiles import PROFILES, jobs_for
from kit.batch.runner import run_jobs
from kit.batch.selection import parse_force, select
from kit.batch.state import rebuild_state
from kit.batch.status import JobStatus
from kit.batch.time_plan import SideBySide, plan_profile, plan_text, side_by_side
from kit.errors import InvalidParameter
from kit.hardware.cuda import unused_gpu_reason
from kit.hardware.kinds import CHOICES as HARDWARE
from kit.hardware.kinds import PREFERENCE
from kit.hardware.kinds import get as get_kind
from kit.hardware.kinds import present as present_kinds
from kit.hardware.kinds import resolve as resolve_hardware
from kit.hardware.reuse import reuse_identity
from kit.paths import outputs_dir
from kit.publish.site import latest_records, rebuild_index, unreadable, write_index

EXIT_OK, EXIT_NOT_OK = 0, 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce", help="run every study notebook into outputs/ and write the index"
    )
    p.add_argument("--profile", choices=PROFILES, default="quick")
    p.add_argument(
        "--hardware",
        default="auto",
        metavar="|".join(HARDWARE),
        help="kind(s) to measure on, comma-separated (auto: this machine's best; "
        "with --scheduler: every kind the workers offer)",
    )
    p.add_argument(
        "--force",
        nargs="?",
        const="1",
        default="0",
        metavar="0|1",
        help="re-run notebooks even if nothing changed (--force or --force 1)",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated words; runs the jobs whose name contains one of them",
    )
    p.add_argument(
        "--search",
        choices=("0", "1"),
        default="1",
        help="1: each row at the configuration its per-row search chooses (default); "
        "0: each row at the published-precision mapping, no search",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:8786",
        help="run the jobs on this Dask cluster (default: on this machine, no cluster)",
    )
    p.add_argument(
        "--warm-kernel",
        choices=WARM_MODES,
        default="auto",
        help="on: the model rows share one warm kernel (imports, kernel start and CUDA context "
        "paid once; every other notebook its own); auto: where the hardware kind says so (cuda); "
        "on this machine only, not with --scheduler",
    )
    p.add_argument(
        "--plan",
        nargs="?",
        const="1",
        default="0",
        choices=("0", "1"),
        help="1 (or --plan alone): print each job's time floor (windows, search probes, "
        "compiles) and run nothing",
    )
    p.set_defaults(func=reproduce)
    s = sub.add_parser("site", help="rebuild outputs/index.html from the results")
    s.set_defaults(func=site)
    r = sub.add_parser(
        "rebuild-state",
        help="rebuild outputs/state.json from outputs/runs/ (the old file is moved aside)",
    )
    r.set_defaults(func=rebuild)
    c = sub.add_parser(
        "clean-outputs", help="delete everything under outputs/ (refused while a batch runs)"
    )
    c.set_defaults(func=clean)


def reproduce(args: argparse.Namespace) -> int:
    force = parse_force(args.force)  # checked in plan mode too: PLAN=1 FORCE=2 is a usage error
    if getattr(args, "plan", "0") == "1":
        return show_plan(args)
    # a bad KIT_OPENVINO_CACHE_GB or KIT_REFERENCE_CACHE stops here, not in every job
    blob_cache_gb()
    reference_outputs.store()
    executor = _executor(args.scheduler)
    kinds = hardware_kinds(args.hardware, executor)
    if executor is None:  # a cluster's workers say what they offer
        refuse_absent(kinds, args.hardware)
    hardware = ",".join(kinds)
    if executor is None and (note := unused_gpu_reason(kinds)):
        print(note)
    if executor is not None and getattr(args, "warm_kernel", "auto") == "on":
        print(
            "--warm-kernel on: no effect with --scheduler (each worker runs every notebook in a "
            "kernel of its own)",
            file=sys.stderr,
        )
    jobs = select(
        jobs_on(args.profile, kinds, research=force, search=args.search == "1"), args.only
    )
    started = time.perf_counter()
    bar = Progress(len(jobs))
    try:
        records = run_jobs(
            jobs,
            force=force,
            context=f"{args.profile}|{hardware}|{parts(kinds, executor)}",
            progress=bar,
            executor=executor,
            command=command_line(args, hardware),
            warm=getattr(args, "warm_kernel", "auto"),
            labels={"profile": args.profile, "hardware": hardware},
        )
    except BatchInterrupted as stop:
        bar.close()
        kept = sum(r.status == JobStatus.OK for r in stop.records)
        resume = (
            "`make reproduce` again resumes"
            if not force
            else "`make reproduce` resumes with the decisions searched so far (each job reads its "
            "row's decision itself); FORCE=1 again would search every row again"
        )
        running = (
            "the running one recorded as interrupted"
            if any(r.status == JobStatus.INTERRUPTED for r in stop.records)
            else "no notebook was running"
        )
        print(
            f"{stop}: {kept} notebook{'' if kept == 1 else 's'} ok kept (outputs/runs), {running}; "
            f"{resume} (state: {outputs_dir() / 'state.json'})"
        )
        return stop.exit_code
    finally:
        bar.close()
    index = write_index([r.to_dict() for r in records], profile=args.profile, hardware=hardware)
    return _summary(records, time.perf_counter() - started, index)


def show_plan(args: argparse.Namespace) -> int:
    """`kit reproduce --plan`: the selected jobs' time floors on each kind, nothing run."""
    if args.scheduler:
        print(
            "--plan: planned on this machine's kinds and candidates, not the workers of "
            f"{args.scheduler}"
        )
    for kind in hardware_kinds(args.hardware):
        chosen = select(jobs_for(args.profile, kind, search=args.search == "1"), args.only)
        floors = plan_profile(
            args.profile,
            kind,
            only={j.name for j in chosen},
            search=args.search == "1",
            warm="off" if args.scheduler else args.warm_kernel,
        )
        side = SideBySide(0, 0, "on the cluster") if args.scheduler else side_by_side(chosen, kind)
        print(plan_text(floors, args.profile, kind, side))
        if before := last_measured(outputs_dir(), args.profile, kind, {f.job for f in floors}):
            print(before)
    return EXIT_OK


def command_line(args: argparse.Namespace, hardware: str) -> str:
    """The `kit reproduce` command that makes this batch again, the hardware as resolved."""
    words = ["kit reproduce", f"--profile {args.profile}", f"--hardware {hardware}"]
    if args.only:
        words.append(f"--only {args.only}")
    if parse_force(args.force):
        words.append("--force 1")
    if args.search == "0":
        words.append("--search 0")
    if args.scheduler:
        words.append(f"--scheduler {args.scheduler}")
    if getattr(args, "warm_kernel", "auto") != "auto" and not args.scheduler:
        words.append(f"--warm-kernel {args.warm_kernel}")
    return " ".join(words)


def _summary(records: list[JobRecord], seconds: float, index: Path) -> int:
    failed = [r for r in records if r.status != JobStatus.OK]
    for r in failed:
        print(f"  {r.name}: {JobStatus(r.status).with_message(r.message)}")
    print(f"index: {index}")
    print(f"outputs: {outputs_dir()}")
    if failed:
        print(
            f"{len(failed)} of {len(records)} notebooks not ok ({seconds:.0f} s): "
            f"{', '.join(f'{r.name} ({r.status})' for r in failed)}"
        )
        return EXIT_NOT_OK
    print(
        f"the notebook ok ({seconds:.0f} s)"
        if len(records) == 1
        else f"all {len(records)} notebooks ok ({seconds:.0f} s)"
    )
    return EXIT_OK


def hardware_kinds(hardware: str, executor=None) -> list[str]:
    """The hardware kinds the batch measures on: `--hardware` (comma-separated), or with `auto`
    this machine's best one, or on a cluster every kind its workers offer."""
    words = [w.strip() for w in hardware.split(",")]
    if words == ["auto"] and executor is not None:
        offered = executor.offered()
        kinds = [k for k in PREFERENCE if k in offered]
        if not kinds:
            raise InvalidParameter(
                "hardware",
                hardware,
                "a kind some worker offers; the cluster's "
                "workers declare no ipu, cuda or cpu resource (docs/cluster.md)",
            )
        return kinds
    if not all(w in HARDWARE for w in words):  # the whole value named: an empty word is no name
        raise InvalidParameter(
            "hardware",
            hardware,
            f"one of {', '.join(HARDWARE)}, or several separated by commas (e.g. ipu,cpu)",
        )
    return list(dict.fromkeys(resolve_hardware(w) for w in words))


def refuse_absent(kinds: list[str], asked: str) -> None:
    """InvalidParameter (exit 2, before any job) naming the first kind asked for that cannot run on
    this machine and why: every job of it would fail, and its failure would stand in the index
    for an earlier run's results."""
    for kind in kinds:
        if why := get_kind(kind).missing_here():
            here = ", ".join(present_kinds())
            raise InvalidParameter(
                "hardware",
                asked,
                f"a kind this machine runs ({here}, or auto); {kind}: {why}. "
                "PLAN=1 (--plan 1) plans a run on any kind",
            )


def parts(kinds: list[str], executor=None) -> str:
    """The exact hardware behind each kind (CPU model, GPU models, IPU part) with the usable cores,
    CPU flags and thread settings, here or on the cluster's workers: part of every job's reuse
    fingerprint, so a result measured on one part (a C600) or with other cores (taskset) is never
    reused on another."""
    found = {
        k: executor.hardware_parts(k) if executor is not None else [reuse_identity(k)]
        for k in kinds
    }
    return "; ".join(f"{k}={' + '.join(v)}" for k, v in found.items())


def jobs_on(
    profile: str, kinds: list[str], research: bool = False, search: bool = True
) -> list[Job]:
    """The profile's jobs on each kind. With several kinds a job whose parameters differ by kind
    runs once per kind, named `<job>@<kind>`; the others (the ones that time nothing) run once.
    `research` (FORCE) makes each model job search its row again; `search=False`: no row
    searches."""
    if len(kinds) == 1:
        return jobs_for(profile, kinds[0], research=research, search=search)
    per_kind = {kind: jobs_for(profile, kind, research=research, search=search) for kind in kinds}
    jobs: list[Job] = []
    for i, job in enumerate(per_kind[kinds[0]]):
        variants = {kind: per_kind[kind][i] for kind in kinds}
        if all(v.parameters == job.parameters for v in variants.values()):
            jobs.append(job)
        else:
            jobs += [
                Job(f"{v.name}@{kind}", v.notebook, v.parameters, v.timeout_s, v.after_all)
                for kind, v in variants.items()
            ]
    return jobs


def _executor(scheduler: str | None):
    if not scheduler:
        return None  # the embedded default: this machine, no cluster

    return DaskExecutor(scheduler)


def rebuild(args: argparse.Namespace) -> int:
    out = outputs_dir()
    with outputs_lock(out, command="kit rebuild-state"):
        state, moved = rebuild_state(out)
    print(
        f"{out / 'state.json'} rebuilt from {len(state['runs'])} runs under {out / 'runs'} "
        f"({len(state['jobs'])} jobs)" + (f"; the old file is now {moved}" if moved else "")
    )
    if state["jobs"]:
        print(f"index: {rebuild_index(out)}")
    return EXIT_OK


def site(args: argparse.Namespace) -> int:
    out = outputs_dir()
    with outputs_lock(out, command="kit site"):
        print(rebuild_index(out))
        problems = unreadable(out, latest_records(out))
    if problems:
        print(
            f"error: {len(problems)} ok job(s) have a result this kit cannot read, shown as "
            f"unreadable in the index: {'; '.join(problems)}; `make reproduce` runs them again",
            file=sys.stderr,
        )
        return EXIT_NOT_OK
    return EXIT_OK


def clean(args: argparse.Namespace) -> int:
    out = outputs_dir()
    print(f"{out}: {clean_outputs(out)} entries removed")
    return EXIT_OK


class Progress:
    """A tqdm bar over notebooks, one line per finished notebook."""

    def __init__(self, total: int):
        self.total = total
        self.bar: Any = None  # a tqdm bar once started

    def start(self) -> None:
        """Drawn once the batch holds outputs/ (kit.batch.runner.BatchProgress)."""
        from tqdm import tqdm

        # no monitor thread: a bar that may share a process with timed work
        tqdm.monitor_interval = 0
        self.bar = tqdm(total=self.total, unit="notebook", file=sys.stdout, dynamic_ncols=True)

    def __call__(self, record: JobRecord) -> None:
        tag = "reused" if record.reused else f"{record.duration_s:.0f} s"
        where = f" on {record.worker or record.host}" if record.worker else ""
        note = f" [{record.note}]" if record.note else ""
        self.bar.write(
            f"{record.status:>11}  {record.name} ({tag}{where}){note}"
            f"{': ' + record.message if record.message else ''}"
        )
        if record.status != JobStatus.INTERRUPTED:  # not done: the next run re-runs it
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
