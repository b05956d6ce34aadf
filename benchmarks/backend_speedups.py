"""Best CPU backend per model: throughput of every backend/precision configuration, as ratios.

Per model (BENCH_MODELS, comma-separated zoo names; default resnet50-torch-fp32) at batch
BENCH_BATCH (default 8): every CPU candidate a row's search measures (kit.search.candidates.
row_candidates at BENCH_SEARCH_DEPTH, quick (default) or full; ONNX Runtime, OpenVINO and, for a
torch model, torch, whose eager fp32 is always there as the baseline), timed in BENCH_ROUNDS
round-robin rounds of BENCH_SECONDS each (median kept), with the ratio vs torch eager fp32 and vs
ONNX Runtime fp32, achieved GFLOP/s and the fraction of the CPU's nominal peak at that precision,
and the numeric diff vs ORT fp32 at the same batch.
OMP_WAIT_POLICY defaults to PASSIVE (benchmarks/__init__.py; export it to override).
BENCH_COMPILE=1 adds the torch.compile candidates (minutes each on a small CPU); BENCH_SLOW=1 the
precisions this CPU only emulates.
Results also go to outputs/bench/backend_speedups.json with the environment.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Iterable

from benchmarks.common import (
    env_float,
    env_int,
    env_list,
    load_note,
    ratio_text,
    ratio_verdict,
    small_models,
    strict,
)
from kit.backends import get_backend
from kit.errors import KitError
from kit.hardware.environment import capture, cpu_peak_gflops
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig
from kit.models import export_model, get_entry
from kit.paths import outputs_dir
from kit.search.candidates import DEPTHS, RowCandidate, row_candidates

TARGET = 2.0  # best 16-bit or 8-bit configuration vs ORT fp32, resnet50
REFERENCE = ("onnxruntime", "fp32")
BASELINE = ("torch", "fp32")


def bench_candidates(
    framework: str,
    depth: str,
    *,
    compiled: bool,
    emulated: bool,
    flags: Iterable[str] | None = None,
) -> list[RowCandidate]:
    """The CPU candidates a `depth` search of a `framework` model measures, the torch.compile ones
    only if `compiled`, the emulated precisions only if `emulated`; torch eager fp32 (the
    baseline) for every torch model. `flags`: the CPU's (default: this machine's)."""
    if depth not in DEPTHS:
        raise KitError(f"BENCH_SEARCH_DEPTH={depth!r}: one of {', '.join(DEPTHS)}")
    every = row_candidates(framework, "cpu", flags=flags)
    baseline = next((c for c in every if plain(c) == BASELINE), None)
    return [
        c
        for c in every
        if (c.depth == "quick" or depth == "full" or c is baseline)
        and (compiled or not c.placement.options.compiles)
        and (emulated or c.native)
    ]


def plain(c: RowCandidate) -> tuple[str, str] | None:
    """(backend, precision) of a candidate at the backend's defaults (no options, default
    threads), what the ratios divide by; None for any other."""
    p = c.placement
    return (p.backend, p.precision) if not p.options.to_dict() and p.threads is None else None


def load_all(model, candidates: list[RowCandidate], batch_size: int) -> dict:
    sessions = {}
    for c in candidates:
        p = c.placement
        try:
            sessions[c.label] = (
                c,
                get_backend(p.backend).load(model, p.backend_config(), batch_size),
            )
        except KitError as exc:
            print(f"  {c.label}: skipped ({exc})")
    return sessions


def time_round_robin(
    sessions: dict, inputs: dict, batch_size: int, rounds: int, seconds: float
) -> dict:
    cfg = MeasureConfig(warmup=1, min_duration_s=seconds, min_count=2)
    per = {label: [] for label in sessions}
    for _ in range(rounds):
        for label, (_, session) in sessions.items():
            per[label].append(session.measure(inputs, batch_size, cfg).throughput)
    return per


def bench_model(name: str, batch_size: int, rounds: int, seconds: float, flags: dict) -> list[dict]:
    model = export_model(name, small=small_models())
    entry = get_entry(name)
    candidates = bench_candidates(
        entry.framework, flags["depth"], compiled=flags["compile"], emulated=flags["slow"]
    )
    sessions = load_all(model, candidates, batch_size)
    inputs = model.make_inputs(batch_size)
    by_key = {plain(c): label for label, (c, _) in sessions.items() if plain(c)}
    ref_label = by_key.get(REFERENCE)
    reference = sessions[ref_label][1].run(inputs) if ref_label else None
    per_round = time_round_robin(sessions, inputs, batch_size, rounds, seconds)
    speed = {label: statistics.median(v) for label, v in per_round.items()}
    rows = []
    for label, (c, session) in sessions.items():
        rows.append(row(model, c, session, speed, label, reference, inputs, by_key))
        rows[-1]["rounds"] = per_round[label]
        rows[-1]["ort_fp32_rounds"] = per_round[ref_label] if ref_label else None
    return rows


def row(
    model, c: RowCandidate, session, speed: dict, label: str, reference, inputs: dict, by_key: dict
) -> dict:
    thr = speed[label]
    ratio = {
        k: thr / speed[by_key[ref]] if ref in by_key else None
        for k, ref in (("vs_torch_fp32", BASELINE), ("vs_ort_fp32", REFERENCE))
    }
    gflops = model.flops_per_sample * thr / 1e9 if model.flops_per_sample else None
    peak = cpu_peak_gflops(c.placement.precision)
    diff = NumericDiff.between(reference, session.run(inputs)) if reference is not None else None
    return {
        "model": model.name,
        "config": label,
        "backend": c.placement.backend,
        "precision": c.placement.precision,
        "why": c.why,
        "throughput": thr,
        **ratio,
        "gflops": gflops,
        "peak_fraction": gflops / peak["gflops"] if gflops else None,
        "peak": peak,
        "diff": diff.to_dict() if diff else None,
        "description": session.description,
    }


def fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def print_rows(rows: list[dict]) -> None:
    print(
        f"  {'configuration':<34}{'samples/s':>10}{'x torch32':>10}{'x ort32':>9}{'GFLOP/s':>9}"
        f"{'% peak':>8}{'max|diff|':>11}{'mean|diff|':>11}"
    )
    for r in sorted(rows, key=lambda r: -r["throughput"]):
        d = r["diff"] or {}
        pct = r["peak_fraction"] * 100 if r["peak_fraction"] is not None else None
        print(
            f"  {r['config']:<34}{r['throughput']:>10.2f}{fmt(r['vs_torch_fp32'], '.2f'):>10}"
            f"{fmt(r['vs_ort_fp32'], '.2f'):>9}{fmt(r['gflops'], '.1f'):>9}{fmt(pct, '.1f'):>8}"
            f"{fmt(d.get('max_abs'), '.2e'):>11}{fmt(d.get('mean_abs'), '.2e'):>11}"
        )


def best_reduced(rows: list[dict]) -> dict | None:
    reduced = [r for r in rows if r["precision"] in ("bf16", "fp16", "int8") and r["vs_ort_fp32"]]
    return max(reduced, key=lambda r: r["vs_ort_fp32"]) if reduced else None


def main() -> int:
    models = env_list("BENCH_MODELS", "resnet50-torch-fp32")
    batch, rounds, seconds = (
        env_int("BENCH_BATCH", 8),
        env_int("BENCH_ROUNDS", 3),
        env_float("BENCH_SECONDS", 2.0),
    )
    flags = {
        "compile": env_int("BENCH_COMPILE", 0) == 1,
        "slow": env_int("BENCH_SLOW", 0) == 1,
        "depth": os.environ.get("BENCH_SEARCH_DEPTH", "quick"),
    }
    all_rows, missed = [], False
    for name in models:
        print(
            f"{name}: batch {batch}, {rounds} round-robin rounds of {seconds:g} s per "
            f"configuration ({load_note()})"
        )
        rows = bench_model(name, batch, rounds, seconds, flags)
        print_rows(rows)
        best = best_reduced(rows)
        if best:
            d = best["diff"] or {}
            iv, verdict = ratio_verdict(best["rounds"], best["ort_fp32_rounds"], TARGET)
            print(
                f"  best 16/8-bit: {best['config']} vs ORT fp32 = "
                f"{ratio_text(iv, verdict, TARGET)} (round-robin rounds paired; max|diff| "
                f"{fmt(d.get('max_abs'), '.2e')}, mean|diff| {fmt(d.get('mean_abs'), '.2e')})"
                + ("" if name.startswith("resnet50") else " [target applies to resnet50 only]")
            )
            missed |= name.startswith("resnet50") and verdict == "MISSED"
        all_rows += rows
    out = outputs_dir() / "bench" / "backend_speedups.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "environment": capture(),
                "batch_size": batch,
                "rounds": rounds,
                "seconds": seconds,
                "rows": all_rows,
            },
            indent=1,
            default=str,
        )
    )
    print(f"  written {out} ({load_note()} at the end)")
    return 1 if missed and strict() else 0


if __name__ == "__main__":
    sys.exit(main())
