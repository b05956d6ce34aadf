"""Per-row search: the configuration the search found against today's mapping, as a ratio measured
in one run, with the fraction of the right peak and the roofline bound.

Per row (BENCH_ROWS: comma-separated model:PRECISION, or 'all' for every headline row; default a
set that exercises every target) at the quick profile's batch size: the row's decision from
kit.search (cached per row and hardware; BENCH_SEARCH_DEPTH, default full, so torch.compile is
tried; BENCH_FORCE=1 searches again), then the chosen and today's configurations loaded side by side
and timed in BENCH_ROUNDS alternating rounds of BENCH_SECONDS each. The ratio is the chosen's
throughput summed over the rounds over today's (the ratio estimator over paired rounds), with its
95 % t interval (benchmarks.common.ratio_verdict).

Targets on this CPU, each judged by that interval (benchmarks.common.target_verdict: met only where
all of it is at or above the target, MISSED where all of it is below): no row slower than today's
mapping (>= 1.0); roformer FP16 >= 1.15x; the BERT-family bf16 rows >= 55 % of the bf16 peak, or
the roofline shows why not.
Results also go to outputs/bench/row_search.json.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import traceback
from pathlib import Path

from benchmarks.common import (
    env_float,
    env_int,
    load_note,
    small_models,
    strict,
    target_verdict,
)
from kit.backends import Placement, require_backend
from kit.batch.profiles import QUICK_SEARCH_BATCH
from kit.hardware.environment import capture, cpu_peak_gflops
from kit.measure.stats import Interval, ratio_interval
from kit.measure.window import MeasureConfig
from kit.models import export_model
from kit.paths import outputs_dir
from kit.search import SearchSettings, decide
from kit.search.row import today_plan
from kit.studies import op_breakdown
from kit.studies.roofline import bytes_per_sample, graph_traffic, memory_bandwidth, position

DEFAULT_ROWS = (
    "roformer-tf-fp32:FP16,bert-torch-fp32:FP16,bert-torch-fp32:FP8,resnet50-torch-fp32:FP16,"
    "resnet50-torch-fp32:FP8,widedeep-tf-fp32:FP16"
)
BERT_FAMILY = ("albert-torch-fp32", "bert-torch-fp32", "roberta-torch-fp32", "deberta-torch-fp32")
ROFORMER_TARGET, PEAK_TARGET = 1.15, 0.55


def rows_to_run() -> list[tuple[str, str]]:
    spec = os.environ.get("BENCH_ROWS", DEFAULT_ROWS)
    if spec == "all":
        from kit.published import figures as published

        return [(r.model, r.precision) for r in published.headline_rows().itertuples()]
    return [tuple(item.split(":")) for item in spec.split(",") if item.strip()]


def load(model, plan: dict, batch: int):
    return require_backend(plan["backend"]).load(
        model, Placement.from_plan(plan).backend_config(), batch
    )


def head_to_head(model, best: dict, today: dict, batch: int, rounds: int, seconds: float) -> dict:
    """Both configurations loaded, timed in alternating rounds; per-round throughputs."""
    inputs = model.make_inputs(batch)
    sessions = {"best": load(model, best, batch)}
    sides = ("best",) if best == today else ("best", "today")
    if best != today:
        sessions["today"] = load(model, today, batch)
    cfg = MeasureConfig(warmup=2, min_duration_s=seconds, min_count=3)
    per = {"best": [], "today": [], "breakdown": None}
    try:
        for r in range(rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                per[side].append(sessions[side].measure_window(inputs, batch, cfg).throughput)
        if best["backend"] == "torch" and best["device"] == "cpu" and model.flops_per_sample:
            times = op_breakdown.profile_torch_session(sessions["best"], inputs)
            per["breakdown"] = op_breakdown.breakdown(
                times, model.flops_per_call(batch), cpu_peak_gflops(best["precision"])["gflops"]
            )
    finally:
        for s in sessions.values():
            s.close()
        gc.collect()
    return per


def bench_row(
    name: str, published: str, depth: str, force: bool, rounds: int, seconds: float
) -> dict:
    batch = QUICK_SEARCH_BATCH.get(name, 1)
    model = export_model(name, small=small_models())
    decision, reused = decide(model, published, batch, "cpu", SearchSettings(depth, force=force))
    today = today_plan(model, published, "cpu")
    today_cfg = today.placement.plan()
    best = decision.plan.placement.plan()
    per = head_to_head(model, best, today_cfg, batch, rounds, seconds)
    ratio = round_ratio(per["best"], per["today"] if best != today_cfg else [])
    thr = statistics.median(per["best"])
    per["today"] = per["today"] or per["best"]
    peak = cpu_peak_gflops(best["precision"])
    traffic = graph_traffic(model.onnx_path, model.inputs)
    roof = position(
        model.flops_per_sample_at(batch),
        bytes_per_sample(traffic, best["precision"], batch),
        peak_gflops=peak["gflops"],
        bandwidth_gbs=memory_bandwidth()["gbs"],
        samples_per_s=thr,
    )
    return {
        "model": name,
        "published": published,
        "batch_size": batch,
        "chosen": decision.chosen,
        "today": decision.today,
        "decision_reused": reused,
        "searched_s": decision.searched_s,
        "search_ratio": decision.ratio_vs_today,
        "ratio": ratio.value,
        "ratio_low": ratio.low,
        "ratio_high": ratio.high,
        "ratio_method": ratio.method,
        "throughput": thr,
        "today_throughput": statistics.median(per["today"]),
        "peak": peak,
        "fraction_of_peak": roof["achieved_gflops"] / peak["gflops"],
        "roofline": roof,
        "probes": [p.to_dict() for p in decision.probes],
        "breakdown": per["breakdown"],
    }


def round_ratio(best: list[float], today: list[float]) -> Interval:
    """The chosen's throughput over today's from paired rounds, with its 95 % interval; exactly 1
    where both are one configuration (`today` empty: its rounds would only measure the noise)."""
    if not today:
        return Interval(1.0, 1.0, 1.0, method="one configuration on both sides: 1 by definition")
    return ratio_interval(best, today, method="paired rounds, ratio estimator, t interval")


def ratio_target(r: dict, target: float) -> str:
    """'met' / 'MISSED' / 'inconclusive' for the row's ratio interval against `target`."""
    return str(target_verdict(r["ratio_low"], r["ratio_high"], target))


def verdicts(r: dict) -> list[str]:
    """Each target this row has, met, missed or inconclusive, in words."""
    out = [f"not slower than today's mapping (ratio >= 1.0, 95 % CI): {ratio_target(r, 1.0)}"]
    if r["model"].startswith("roformer") and r["published"] == "FP16":
        out.append(f"roformer >= {ROFORMER_TARGET}x (95 % CI): {ratio_target(r, ROFORMER_TARGET)}")
    if r["model"] in BERT_FAMILY and r["published"] == "FP16":
        roof, frac = r["roofline"], r["fraction_of_peak"]
        if frac >= PEAK_TARGET:
            out.append(f">= {PEAK_TARGET:.0%} of the bf16 peak: met ({frac:.0%})")
        elif (
            roof["bound"] == "memory"
            or roof["attainable_gflops"] < PEAK_TARGET * r["peak"]["gflops"]
        ):
            out.append(
                f">= {PEAK_TARGET:.0%} of peak: not reachable, {roof['bound']} bound (intensity "
                f"{roof['intensity_flop_per_byte']:.0f} FLOP/B, ridge "
                f"{roof['ridge_flop_per_byte']:.0f}; attainable {roof['attainable_gflops']:.0f} "
                f"GFLOP/s); achieved {frac:.0%}"
            )
        elif r.get("breakdown"):
            out.append(
                f">= {PEAK_TARGET:.0%} of peak: not reached ({frac:.0%}), compute bound; why, from "
                f"the operator breakdown: {op_breakdown.reason(r['breakdown'])}"
            )
        else:
            out.append(
                f">= {PEAK_TARGET:.0%} of peak: MISSED ({frac:.0%}; the roofline puts it compute "
                f"bound, so bandwidth does not explain the gap; {load_note()})"
            )
    return out


def interval_text(r: dict) -> str:
    """'1.23x [1.10, 1.36]', or the ratio alone where the rounds gave no interval."""
    if r["ratio_low"] is None or r["ratio_high"] is None:
        return f"{r['ratio']:.2f}x (no interval)"
    return f"{r['ratio']:.2f}x [{r['ratio_low']:.2f}, {r['ratio_high']:.2f}]"


def print_row(r: dict) -> None:
    p, roof = r["peak"], r["roofline"]
    how = "cached" if r["decision_reused"] else f"searched in {r['searched_s']} s"
    print(
        f"  {r['model']} {r['published']} batch {r['batch_size']}: chosen {r['chosen']} vs today's "
        f"{r['today']}: {interval_text(r)} "
        f"({r['throughput']:.3g} vs {r['today_throughput']:.3g} samples/s; decision {how})"
    )
    print(
        f"    {roof['achieved_gflops']:.0f} {p['unit']} = {r['fraction_of_peak']:.0%} of the "
        f"{p['precision']} peak ({p['gflops']:g}); {roof['bound']} bound, "
        f"{roof['fraction_of_bound']:.0%} of it{' (FLAG: far below)' if roof['far_below'] else ''}"
    )
    for v in verdicts(r):
        print(f"    {v}")


def main() -> int:
    depth = os.environ.get("BENCH_SEARCH_DEPTH", "full")
    force = env_int("BENCH_FORCE", 0) == 1
    rounds, seconds = env_int("BENCH_ROUNDS", 4), env_float("BENCH_SECONDS", 2.0)
    print(
        f"per-row search ({depth}) vs today's mapping, {rounds} alternating rounds of {seconds:g} "
        f"s ({load_note()})"
    )
    results, missed = [], False
    for name, published in rows_to_run():
        try:
            r = bench_row(name, published, depth, force, rounds, seconds)
        except Exception as exc:  # noqa: BLE001 - one row failing never stops the others
            where = traceback.extract_tb(exc.__traceback__)[-1]
            print(
                f"  {name} {published}: FAILED ({type(exc).__name__}: {exc}; at "
                f"{Path(where.filename).name}:{where.lineno})",
                flush=True,
            )
            missed = True
            continue
        print_row(r)
        missed |= any("MISSED" in v for v in verdicts(r))
        results.append(r)
        sys.stdout.flush()
    out = outputs_dir() / "bench" / "row_search.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "environment": capture(),
                "depth": depth,
                "rounds": rounds,
                "seconds": seconds,
                "bandwidth": memory_bandwidth(),
                "rows": results,
            },
            indent=1,
            default=str,
        )
    )
    print(f"  written {out} ({load_note()} at the end)")
    return 1 if missed and strict() else 0


if __name__ == "__main__":
    sys.exit(main())
