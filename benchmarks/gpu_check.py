"""One call that proves the kit's GPU path on a lent GPU host, within a time budget.

    python -m benchmarks.gpu_check --budget-s 520 --out /tmp/gpu_check

Runs on the interpreter it is started with (a GPU host lent for minutes has no venv: papermill and
the rest come from carried wheels on PYTHONPATH), each check a subprocess bounded by what is left of
the budget, most telling first:

1. `benchmarks.peers --hardware cuda` on resnet50 FP16 and bert FP16 at their published batches
   (the kit's arm against the best plain-PyTorch host-to-host peer; target: kit ÷ best >= 0.95);
2. a cold quick `kit reproduce --hardware cuda` into a fresh outputs folder (KIT_OUTPUTS; target
   <= 600 s, every job ok);
3. a warm rerun of it: the same folder with everything but `cache/` removed (target <= 180 s);
4. the peers of every other torch row, on the reproduce's outputs folder (its decisions reused).

A check that would start with less time left than it needs is skipped, and says so. Writes into
`--out`: summary.txt (one line a check with its figure, target and verdict; the card, driver and
versions), checks.json (the same, structured), peers.json (every peer row), log.txt (each check's
command and its output's tail). Exits 0 only when every check it ran met its target, 1 otherwise
(nothing ran, a target missed, a check cut short), 2 where the GPU or a package is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.gpu_check_report import Check, Facts, Outcome, job_lines, peer_outcome, summary_text
from benchmarks.gpu_check_runner import STOP_S, Completed, Runner, run_process
from kit.hardware.environment import gpu_facts
from kit.models import get_entry
from kit.published import figures as published

EXIT_MET, EXIT_NOT_MET, EXIT_MISSING = 0, 1, 2
COLD_TARGET_S, WARM_TARGET_S = 600.0, 180.0
FIRST_ROWS = ("resnet50-torch-fp32:FP16", "bert-torch-fp32:FP16")
RESERVE_S = 5.0  # kept back for the summary after the last check
#: A check starts only with at least this left: one cut short proves nothing and fails the run (a
#: GPU row's peers search, compile and time 3-4 arms at each batch; a reproduce needs room to end)
MIN_S = {"peers": 120.0, "reproduce-cold": 240.0, "reproduce-warm": 120.0}
HARDWARE = ("cuda", "cpu")
NEEDED = ("papermill", "nbformat", "nbconvert", "ipykernel", "scipy")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_check", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--budget-s", type=float, required=True, help="seconds the whole check may take")
    p.add_argument(
        "--out", required=True, help="folder for summary.txt, checks.json, peers.json, log.txt"
    )
    p.add_argument(
        "--work", default="/tmp/gpu_check", help="outputs folders and full logs (large; not --out)"
    )
    # defaults from the environment: a caller that cannot add arguments (../shared/gpu/)
    env = os.environ.get
    p.add_argument(
        "--rows",
        default=env("GPU_CHECK_ROWS", "torch"),
        help="'torch' (every torch row) or model:PRECISION,... (GPU_CHECK_ROWS)",
    )
    p.add_argument(
        "--checks",
        default=env("GPU_CHECK_CHECKS", ""),
        help="kinds or names to keep, e.g. reproduce-cold,reproduce-warm (GPU_CHECK_CHECKS; "
        "default all)",
    )
    p.add_argument(
        "--only",
        default=env("GPU_CHECK_ONLY", ""),
        help="kit reproduce --only words (GPU_CHECK_ONLY; default: every job)",
    )
    p.add_argument("--peer-rounds", type=int, default=3)
    p.add_argument("--peer-seconds", type=float, default=2.0)
    p.add_argument(
        "--hardware",
        default=env("GPU_CHECK_HARDWARE", "cuda"),
        choices=HARDWARE,
        help="cpu: a dry run of the same checks without a GPU (its figures say nothing about one; "
        "GPU_CHECK_HARDWARE)",
    )
    args = p.parse_args(argv)
    if args.hardware not in HARDWARE:  # argparse checks a flag's value, not a default's
        p.error(f"GPU_CHECK_HARDWARE={args.hardware!r}: allowed are {', '.join(HARDWARE)}")
    return args


def torch_rows() -> list[str]:
    """Every published row whose zoo model is built in PyTorch, the two most telling first."""
    rows = [
        f"{r.model}:{r.precision}"
        for r in published.headline_rows().itertuples()
        if get_entry(r.model).framework.torch_module
    ]
    return [r for r in FIRST_ROWS if r in rows] + [r for r in rows if r not in FIRST_ROWS]


def plan(rows: list[str], args: argparse.Namespace, work: Path) -> list[Check]:
    """The checks in the order they run: the first rows' peers, cold then warm reproduce, the
    rest."""
    first, later = [r for r in rows if r in FIRST_ROWS], [r for r in rows if r not in FIRST_ROWS]
    checks = [peers_check(r, args, work / "outputs-peers") for r in first]
    checks += [
        reproduce_check("reproduce-cold", args, work / "outputs", COLD_TARGET_S),
        reproduce_check("reproduce-warm", args, work / "outputs", WARM_TARGET_S),
    ]
    checks += [peers_check(r, args, work / "outputs") for r in later]
    keep = {c.strip() for c in args.checks.split(",") if c.strip()}
    return [c for c in checks if not keep or c.name in keep or c.kind in keep]


def peers_check(row: str, args: argparse.Namespace, outputs: Path) -> Check:
    out = outputs.parent / f"peers-{row.replace(':', '-')}.json"
    argv = [
        sys.executable,
        "-m",
        "benchmarks.peers",
        "--hardware",
        args.hardware,
        "--rows",
        row,
        "--batches",
        "published",
        "--rounds",
        str(args.peer_rounds),
        "--seconds",
        f"{args.peer_seconds:g}",
        "--out",
        str(out),
    ]
    return Check(
        f"peers {row}",
        "peers",
        argv,
        outputs,
        MIN_S["peers"],
        "kit ÷ best plain-PyTorch peer >= 0.95",
        result=out,
    )


def reproduce_check(name: str, args: argparse.Namespace, outputs: Path, target_s: float) -> Check:
    argv = [
        sys.executable,
        "-m",
        "kit.cli.main",
        "reproduce",
        "--profile",
        "quick",
        "--hardware",
        args.hardware,
        "--search",
        "1",
        *(["--only", args.only] if args.only else []),
    ]
    return Check(
        name,
        name,
        argv,
        outputs,
        MIN_S[name],
        f"every job ok in <= {target_s:g} s",
        target_s=target_s,
    )


def missing(hardware: str = "cuda") -> list[str]:
    """What this interpreter lacks for the checks on `hardware`, each naming what it is for; []
    when all is here."""
    try:
        import torch
    except ImportError:
        return [f"torch (not importable by {sys.executable})"]
    gaps = [
        f"{m} (kit reproduce and the peers need it; carry its wheel)"
        for m in NEEDED
        if importlib.util.find_spec(m) is None
    ]
    if hardware != "cuda":
        return gaps
    if not torch.version.cuda:
        gaps.insert(0, f"a CUDA build of torch (torch {torch.__version__} is a CPU build)")
    elif not torch.cuda.is_available():
        gaps.insert(
            0,
            f"a usable NVIDIA GPU (torch {torch.__version__}, built for CUDA {torch.version.cuda}, "
            "sees none: no device, or no driver)",
        )
    return gaps


def host_facts() -> Facts:
    """The card, its driver and the versions that ran (read here, in this process)."""
    import torch

    gpu = gpu_facts()
    card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return Facts(
        card=card,
        driver=gpu.get("driver"),
        cuda_driver=gpu.get("cuda_driver"),
        torch=torch.__version__,
        torch_cuda=torch.version.cuda,
        cudnn=gpu.get("cudnn_torch"),
        python=platform.python_version(),
        cores=os.cpu_count(),
    )


class Budget:
    """Seconds left of `total` on `clock`, less the reserve kept for the summary."""

    def __init__(self, total: float, clock: Callable[[], float] = time.monotonic):
        self.total, self.clock, self.start = total, clock, clock()

    def left(self) -> float:
        return self.total - (self.clock() - self.start) - RESERVE_S

    def used(self) -> float:
        return self.clock() - self.start


def run_checks(
    checks: list[Check],
    budget: Budget,
    runner: Runner,
    out: Path,
    after_each: Callable[[list[Outcome]], None] = lambda outcomes: None,
) -> list[Outcome]:
    """Each check in order, as far as the budget allows, `after_each` called after each; a SIGINT
    (the caller's own limit) ends the run, the check in flight recorded as cut short."""
    outcomes: list[Outcome] = []
    for check in checks:
        try:
            outcomes.append(run_one(check, budget, runner, out, outcomes))
        except KeyboardInterrupt:
            outcomes.append(
                Outcome(check, "cut short", "interrupted (SIGINT): the caller's time limit")
            )
            break
        after_each(outcomes)
    return outcomes


def run_one(
    check: Check, budget: Budget, runner: Runner, out: Path, before: list[Outcome]
) -> Outcome:
    left = budget.left()
    if check.kind == "reproduce-warm" and not any(
        o.check.kind == "reproduce-cold" and o.completed for o in before
    ):
        return Outcome(
            check, "skipped", "the cold reproduce did not complete: nothing to rerun warm"
        )
    if left < check.min_s:
        return Outcome(
            check, "skipped", f"budget: {max(left, 0):.0f} s left, it needs >= {check.min_s:.0f} s"
        )
    prepare(check)
    limit = max(left - STOP_S, 0.0)  # stopping it at its limit takes up to STOP_S more
    done = runner(
        check.argv,
        {**os.environ, "KIT_OUTPUTS": str(check.outputs)},
        limit,
        out / "log.txt",
        check.full_log,
    )
    return judge(check, done, limit)


def prepare(check: Check) -> None:
    """A cold reproduce starts from an empty folder; a warm one keeps only its cache/."""
    if check.kind == "reproduce-cold" and check.outputs.exists():
        shutil.rmtree(check.outputs)
    if check.kind == "reproduce-warm" and check.outputs.exists():
        for child in check.outputs.iterdir():
            if child.name != "cache":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    check.outputs.mkdir(parents=True, exist_ok=True)


def judge(check: Check, done: Completed, limit: float) -> Outcome:
    if done.timed_out:
        return Outcome(
            check,
            "cut short",
            f"stopped by the budget after {done.seconds:.0f} s (limit {limit:.0f} s)",
            seconds=done.seconds,
        )
    if check.kind == "peers":
        return peer_outcome(check, done)
    met = done.returncode == 0 and done.seconds <= check.target_s
    why = f"{done.seconds:.0f} s, exit {done.returncode}" + (
        "" if done.returncode == 0 else " (a job not ok: see log)"
    )
    return Outcome(
        check,
        "met" if met else "MISSED",
        why,
        seconds=done.seconds,
        completed=done.returncode == 0,
        lines=job_lines(check.outputs),
    )


def write(
    out: Path,
    outcomes: list[Outcome],
    facts: Facts | None,
    budget: Budget,
    gaps: list[str],
    code: int,
    hardware: str = "cuda",
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.txt").write_text(
        summary_text(outcomes, facts, budget.total, budget.used(), gaps, code, hardware)
    )
    (out / "checks.json").write_text(
        json.dumps(
            {
                "exit": code,
                "budget_s": budget.total,
                "used_s": round(budget.used(), 1),
                "missing": gaps,
                "facts": facts.to_dict() if facts else None,
                "checks": [o.to_dict() for o in outcomes],
            },
            indent=1,
        )
    )
    rows = [row for o in outcomes for row in o.peer_rows]
    (out / "peers.json").write_text(json.dumps({"rows": rows}, indent=1, default=str))


def exit_code(outcomes: list[Outcome]) -> int:
    ran = [o for o in outcomes if o.verdict != "skipped"]
    return EXIT_MET if ran and all(o.verdict == "met" for o in ran) else EXIT_NOT_MET


def check_gpu(
    args: argparse.Namespace,
    *,
    runner: Runner = run_process,
    gaps: Callable[[str], list[str]] = missing,
    facts: Callable[[], Facts] = host_facts,
    rows: Callable[[], list[str]] = torch_rows,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The whole check: exit 2 (summary naming what is missing) without CUDA, else every check the
    budget allows. `runner`, `gaps`, `facts`, `rows` and `clock` are injected by the tests."""
    budget, out = Budget(args.budget_s, clock), Path(args.out)
    lacking = gaps(args.hardware)
    if lacking:
        write(out, [], None, budget, lacking, EXIT_MISSING, args.hardware)
        print(f"gpu_check: missing {'; '.join(lacking)}", file=sys.stderr)
        return EXIT_MISSING
    host = facts()
    asked = (
        rows() if args.rows == "torch" else [r.strip() for r in args.rows.split(",") if r.strip()]
    )
    outcomes = run_checks(
        plan(asked, args, Path(args.work)),
        budget,
        runner,
        out,
        lambda done: write(out, done, host, budget, [], exit_code(done), args.hardware),
    )
    code = exit_code(outcomes)  # written after each check too: a run cut off keeps them
    write(out, outcomes, host, budget, [], code, args.hardware)
    print((out / "summary.txt").read_text())
    return code


def main(argv: list[str] | None = None) -> int:
    return check_gpu(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
