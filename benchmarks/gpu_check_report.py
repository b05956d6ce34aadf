"""What benchmarks/gpu_check.py checks and how it says what came out: each check, its outcome, the
host's facts, and the summary text (one line a check, a line a peer batch under it).

>>> c = Check("reproduce-warm", "reproduce-warm", ["kit"], Path("/tmp/o"), 30.0, "every job ok in <= 180 s")
>>> print(summary_text([Outcome(c, "skipped", "budget: 10 s left, it needs >= 30 s")], None, 60, 50, [], 1))
... # doctest: +NORMALIZE_WHITESPACE
gpu_check: exit 1 (0 met, 0 not met, 1 skipped; 50 of 60 s used)
reproduce-warm: skipped (budget: 10 s left, it needs >= 30 s) [target: every job ok in <= 180 s]
"""  # noqa: E501

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import TargetVerdict
from benchmarks.gpu_check_runner import Completed
from kit.batch.local import warm_job
from kit.batch.prepare import Step
from kit.errors import KitError
from kit.search.cost import CompileWork, seconds
from kit.search.probe import Probe

PEER_TARGET = 0.95


@dataclass(frozen=True)
class Check:
    """One subprocess to run: `kind` is peers, reproduce-cold or reproduce-warm; `outputs` its
    KIT_OUTPUTS; `min_s` the seconds it needs to start; `result` the peers' JSON."""

    name: str
    kind: str
    argv: list[str]
    outputs: Path
    min_s: float
    target: str
    result: Path | None = None
    target_s: float = math.inf

    @property
    def full_log(self) -> Path:
        return (
            self.outputs.parent / "logs" / (self.name.replace(" ", "-").replace(":", "-") + ".txt")
        )


@dataclass
class Outcome:
    """A check's verdict (met, MISSED, inconclusive, cut short, failed, skipped) and why; a peer
    check's batches."""

    check: Check
    verdict: str
    why: str
    seconds: float | None = None
    completed: bool = False
    lines: list[str] = field(default_factory=list)
    peer_rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "name": self.check.name,
            "kind": self.check.kind,
            "target": self.check.target,
            "verdict": self.verdict,
            "why": self.why,
            "seconds": self.seconds,
            "lines": self.lines,
            "command": self.check.argv,
        }


@dataclass(frozen=True)
class Facts:
    card: str
    driver: str | None
    cuda_driver: str | None
    torch: str
    torch_cuda: str | None
    cudnn: int | None
    python: str
    cores: int | None

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return (
            f"card: {self.card}; driver {self.driver} (CUDA {self.cuda_driver}); torch "
            f"{self.torch} (CUDA {self.torch_cuda}, cuDNN {self.cudnn}); Python {self.python}; "
            f"{self.cores} cores"
        )


def batch_verdict(b: dict) -> str:
    """A peer batch's verdict as benchmarks.peers wrote it; an arm that did not load is a miss."""
    return TargetVerdict.MISSED if "error" in b else b.get("verdict", TargetVerdict.INCONCLUSIVE)


def peers_verdict(verdicts: list[str]) -> str:
    """A peer check's verdict from its batches': MISSED where any missed (or none ran), met where
    every one met, else inconclusive (not met: gpu_check exits 1)."""
    if not verdicts or TargetVerdict.MISSED in verdicts:
        return TargetVerdict.MISSED
    met = all(v == TargetVerdict.MET for v in verdicts)
    return TargetVerdict.MET if met else TargetVerdict.INCONCLUSIVE


def peer_outcome(check: Check, done: Completed) -> Outcome:
    """The batches' verdict where the peers wrote the row (peers_verdict); a line a batch."""
    try:
        rows = json.loads(check.result.read_text())["rows"] if check.result else []
    except (OSError, ValueError, KeyError):
        rows = []
    if not rows:
        return Outcome(
            check,
            "failed",
            f"exit {done.returncode}, no row measured (the kit's search or an arm failed: see log)",
            seconds=done.seconds,
            completed=True,
        )
    batches = [b for r in rows for b in r["batches"]]
    lines = [batch_line(r, b) for r in rows for b in r["batches"]]
    return Outcome(
        check,
        peers_verdict([batch_verdict(b) for b in batches]),
        f"{len(batches)} batch(es), {done.seconds:.0f} s",
        seconds=done.seconds,
        completed=True,
        lines=lines,
        peer_rows=rows,
    )


SLOWEST = 5


def job_lines(outputs: Path) -> list[str]:
    """From a reproduce's outputs/state.json: how many jobs ended ok, the slowest and any not ok."""
    try:
        jobs = list(json.loads((outputs / "state.json").read_text())["jobs"].values())
    except (OSError, ValueError, KeyError, AttributeError):
        return ["no outputs/state.json: no job finished"]
    ok = [j for j in jobs if j.get("status") == "ok"]
    slowest = sorted(jobs, key=lambda j: -(j.get("duration_s") or 0))[:SLOWEST]
    lines = [
        f"{len(ok)} of {len(jobs)} jobs ok; slowest: "
        + ", ".join(f"{j.get('name')} {j.get('duration_s') or 0:.0f} s" for j in slowest)
    ]
    return (
        lines
        + [
            f"{j.get('name')}: {j.get('status')} ({(j.get('message') or '')[:160]})"
            for j in jobs
            if j.get("status") != "ok"
        ]
        + time_lines(outputs, jobs)
        + prepare_lines(outputs)
        + compile_lines(outputs)
    )


def time_lines(outputs: Path, jobs: list[dict]) -> list[str]:
    """Where the jobs' seconds went, from each result's time account: inside the studies (by
    phase) and outside them (kernel start, imports, report), own kernel against the warm one's
    first job and the rest: the figures kit.batch.time_plan.GUESSES guesses."""
    inside, outside, phases = 0.0, {"own": [], "warm first": [], "warm": []}, {}
    for j in jobs:
        account = _time_account(outputs, j)
        if account is None or not j.get("duration_s"):
            continue
        inside += account["total_s"]
        place = warm_job(j.get("note") or "")
        group = "own" if place is None else "warm first" if place == 1 else "warm"
        outside[group].append(j["duration_s"] - account["total_s"])
        for p in account.get("phases") or []:
            seconds, count = phases.get(p["phase"], (0.0, 0))
            phases[p["phase"]] = (seconds + p["seconds"], count + 1)
    if not phases and not any(outside.values()):
        return []
    spent = " + ".join(
        f"{group} {len(xs)} x {sum(xs) / len(xs):.1f} s" for group, xs in outside.items() if xs
    )
    by_phase = sorted(phases.items(), key=lambda kv: -kv[1][0])
    return [
        f"seconds in the studies {inside:.0f}; outside them (a job's kernel, imports, report): "
        f"{spent}",
        "studies' phases: " + ", ".join(f"{name} {sec:.0f} s ({n})" for name, (sec, n) in by_phase),
    ]


PREPARED = {
    Step.EXPORTS.run_key: "exports",
    Step.COMPILES.run_key: "torch.compile candidates compiled ahead",
}


def prepare_lines(outputs: Path) -> list[str]:
    """What the newest batch made side by side before its first job (its runs/<id>/batch.run):
    the exports and the compiles ahead (kit.batch.prepare), each with how many at once and its
    seconds; where nothing was, nothing."""
    runs = sorted((outputs / "runs").glob("*/batch.run"), key=lambda p: p.stat().st_mtime)
    try:
        run = json.loads(runs[-1].read_text()) if runs else {}
    except (OSError, ValueError):
        return []
    steps = [
        f"{what} {len(run[key].get('made', []))} ({run[key].get('parallel')} at a time, "
        f"{run[key].get('seconds', 0):.0f} s; {len(run[key].get('failed', []))} failed)"
        for key, what in PREPARED.items()
        if isinstance(run.get(key), dict)
    ]
    return ["before the first job: " + "; ".join(steps)] if steps else []


def compile_lines(outputs: Path) -> list[str]:
    """The searches' own torch.compile and TensorRT probes (their decisions under cache/search/, so
    a rerun that reused them shows the run that searched; a probe taken from the sibling row's
    search is counted there only): how many, their seconds, and how many read their graph from
    inductor's cache (compiled ahead, or by an earlier run) or their engine from TensorRT's engine
    cache: what kit.batch.time_plan.GUESSES guesses as compile_s, cached_compile and
    engine_build_s."""
    work = CompileWork.of([p for p in searched_probes(outputs) if not p.shared_from])
    lines = []
    if work.compiled:
        fresh = [p for p in work.compiled if p not in work.cached]
        lines.append(
            f"searches' torch.compile probes: {len(work.compiled)}; compiled there {len(fresh)} "
            f"({_each(fresh)}); read from inductor's cache {len(work.cached)} "
            f"({_each(work.cached)})"
        )
    if work.engines:
        lines.append(
            f"searches' TensorRT probes: {len(work.engines)}; engines built there "
            f"{len(work.built)} ({_each(work.built)}); read from the engine cache "
            f"{len(work.read)} ({_each(work.read)})"
        )
    return lines


def searched_probes(outputs: Path) -> list[Probe]:
    """Every probe of the search decisions under `outputs`/cache/search (an unreadable file or
    probe skipped: the summary reports what it can)."""
    probes = []
    for path in sorted((outputs / "cache" / "search").glob("*.json")):
        try:
            written = json.loads(path.read_text()).get("probes") or []
        except (OSError, ValueError, AttributeError):
            continue
        for d in written:
            if not isinstance(d, dict):
                continue
            try:
                probes.append(Probe.from_dict(d))
            except (KitError, KeyError, TypeError, ValueError):
                continue
    return probes


def _each(probes: list[Probe]) -> str:
    if not probes:
        return "none"
    return f"{seconds(probes) / len(probes):.1f} s each"


def _time_account(outputs: Path, job: dict) -> dict | None:
    """The job's result's time account ({total_s, phases}), None where it has none."""
    try:
        result = json.loads((outputs / job["results"]).read_text())
        account = result["tables"]["time_account"]
        float(account["total_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return account


def batch_line(row: dict, b: dict) -> str:
    if "error" in b:
        return f"b{b['batch_size']}: {b['error']}"
    best = b["peers"][b["best_peer"]]
    ci = b.get("kit_over_best_ci95") or [None, None]
    interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci[0] is not None else "[no CI]"
    chosen = (b.get("kit_decision") or row.get("kit") or {}).get("chosen")
    return (
        f"b{b['batch_size']}: kit {b['kit']['throughput_median']:.4g}/s ({chosen}) ÷ best "
        f"peer {b['best_peer']} {best['throughput_median']:.4g}/s = {b['kit_over_best']:.2f} "
        f"{interval} (target >= {PEER_TARGET}: {batch_verdict(b)})"
    )


def summary_text(
    outcomes: list[Outcome],
    facts: Facts | None,
    budget_s: float,
    used_s: float,
    missing: list[str],
    code: int,
    hardware: str = "cuda",
) -> str:
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("met", "skipped")}
    failing = len(outcomes) - counts["met"] - counts["skipped"]
    lines = [
        f"gpu_check: exit {code} ({counts['met']} met, {failing} not met, {counts['skipped']} "
        f"skipped; {used_s:.0f} of {budget_s:g} s used)"
    ]
    if hardware != "cuda":
        lines.append(
            f"DRY RUN on {hardware} (--hardware {hardware}): the checks as on a GPU, their figures "
            "say nothing about one"
        )
    lines += [f"missing: {m}" for m in missing]
    if facts is not None:
        lines.append(facts.line())
    for o in outcomes:
        lines.append(f"{o.check.name}: {o.verdict} ({o.why}) [target: {o.check.target}]")
        lines += [f"    {line}" for line in o.lines]
    return "\n".join(lines) + "\n"
