"""`make bench-peers`: each published row, at its published batch sizes, run the kit's way against
what a CPU user would run instead, on the same ONNX export, batch and seeded inputs.

Arms (benchmarks/peer_arms.py), each a separate warm process: the kit's chosen configuration (the
row's cached quick search decision at that batch, made now if absent, exactly as `kit reproduce`
makes it and under the key its job reads: `kit_plans`) through the kit's timed window; plain ONNX
Runtime fp32 (default session options); OpenVINO f32 and bf16 (bf16 only where the CPU has it);
OpenVINO NNCF int8 for FP8 rows. On an NVIDIA GPU (--hardware cuda, or auto where one is usable) the
peers are plain PyTorch fp16 host to host (eager channels_last, one CUDA graph, torch.compile
reduce-overhead) and, where installed, ONNX Runtime's TensorRT provider and TensorRT itself
(benchmarks/peer_gpu_arms.py); the kit's arm is the row's GPU decision. Rounds are interleaved
(every arm once per round, the order rotated each round); per round the ratio kit ÷ peer; the figure
is the median of those ratios with a bootstrap 95 % CI (scipy.stats.bootstrap, percentile method).
Each arm's outputs pass the kit's numerics gate (kit.search.gate) against ONNX Runtime fp32 or
are no yardstick. Target: kit ÷ best peer >= 0.95 on every row, the best peer the one with the
highest median throughput among those that pass; met where the whole CI is at or above it, missed where all of it is below, else
inconclusive (it straddles the target, or fewer than 3 rounds gave no CI): benchmarks.common's
target_verdict.

    python -m benchmarks.peers --rows resnet50-torch-fp32:FP16,bert-torch-fp32:FP8 --rounds 6 --seconds 5
    python -m benchmarks.peers --rows all --batches published      # every row, every published batch

Peer versions: benchmarks/requirements-peers.txt. Writes outputs/bench/peers.json.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.common import TargetVerdict, load_note, strict, target_verdict
from benchmarks.peer_arms import serve
from benchmarks.peer_gpu_arms import TORCH_ARMS
from kit.atomic import write_text
from kit.backends import BackendConfig, require_backend
from kit.backends import reference_outputs as kept_references
from kit.batch.profiles import search_batch
from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.hardware.environment import capture, cpu_flags
from kit.measure.numerics import NumericDiff
from kit.models import export_model, get_entry
from kit.models.spec import Framework
from kit.paths import output_file, outputs_dir
from kit.precision import PublishedPrecision
from kit.published import figures as published
from kit.search import SearchSettings, decide, key_hash
from kit.search.gate import NumericsVerdict, numerics_gate
from kit.search.probe import nonfinite, reference_scale

TARGET = 0.95
PEERS = ("ort-fp32", "ov-f32", "ov-bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
HARDWARE = ("auto", "cpu", "cuda")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--rows",
        default=os.environ.get("PEERS_ROWS", "all"),
        help="model:PRECISION,... or 'all' (every published row); model:PRECISION@1/8 sets the "
        "row's batch sizes (where a published one takes minutes per call here)",
    )
    p.add_argument(
        "--batches",
        default=os.environ.get("PEERS_BATCHES", "published"),
        help="'published' (every published batch size), 'max', 'min', or sizes like 4,32",
    )
    p.add_argument("--rounds", type=int, default=int(os.environ.get("PEERS_ROUNDS", 6)))
    p.add_argument("--seconds", type=float, default=float(os.environ.get("PEERS_SECONDS", 5.0)))
    p.add_argument(
        "--arms", default=os.environ.get("PEERS_ARMS", ""), help="peer arms to keep (default all)"
    )
    p.add_argument(
        "--hardware",
        default=os.environ.get("PEERS_HARDWARE", "auto"),
        choices=HARDWARE,
        help="cpu, cuda, or auto (cuda where a CUDA backend loads, else cpu)",
    )
    p.add_argument(
        "--out",
        default=str(outputs_dir() / "bench" / "peers.json"),
        help="the JSON file to write, or a folder to write peers.json in",
    )
    return p.parse_args(argv)


def rows(spec: str) -> list[tuple[str, str, list[int] | None]]:
    """(model, PRECISION, batch sizes or None) per row; 'model:PRECISION@1/8' gives the row's
    batches."""
    if spec == "all":
        return [(r.model, r.precision, None) for r in published.headline_rows().itertuples()]
    known = {f"{r.model}:{r.precision}" for r in published.headline_rows().itertuples()}
    out = []
    for item in (i.strip() for i in spec.split(",") if i.strip()):
        row, _, sizes = item.partition("@")
        if row not in known:
            raise InvalidParameter(
                "--rows",
                item,
                f"'all' or model:PRECISION[@b1/b2] of a published row: {', '.join(sorted(known))}",
            )
        if sizes and not all(b.isdigit() and int(b) > 0 for b in sizes.split("/")):
            raise InvalidParameter("--rows", item, "batch sizes as positive integers, e.g. @1/8")
        model, precision = row.split(":")
        out.append((model, precision, [int(b) for b in sizes.split("/")] if sizes else None))
    return out


def batches_of(model: str, precision: str, spec: str, given: list[int] | None = None) -> list[int]:
    sizes = published.ipu_run_settings(model, precision)["batch_sizes"] or [1]
    if given:
        return given
    if spec == "published":
        return sizes
    if spec in ("max", "min"):
        return [max(sizes) if spec == "max" else min(sizes)]
    return [int(b) for b in spec.split(",")]


def resolve_hardware(asked: str) -> str:
    """'cpu' or 'cuda'; auto: cuda where a CUDA backend loads (an IPU's rows run its published
    settings)."""
    return ("cuda" if "cuda" in kinds.present() else "cpu") if asked == "auto" else asked


def gpu_arms(framework: Framework | str) -> tuple[list[str], dict[str, str]]:
    """A GPU row's peer arms (plain PyTorch for a torch zoo model; ORT TensorRT and TensorRT where
    installed), and those left out with the reason."""
    import importlib.util

    import onnxruntime as ort

    framework = Framework.parse(framework)
    arms, skipped = [], {}
    for arm in TORCH_ARMS:
        if framework.torch_module:
            arms.append(arm)
        else:
            skipped[arm] = (
                f"a {framework} model: the plain PyTorch peers need a zoo model built in torch"
            )
    if "TensorrtExecutionProvider" in ort.get_available_providers():
        arms.append("ort-trt-fp16")
    else:
        skipped["ort-trt-fp16"] = (
            "ONNX Runtime here has no TensorrtExecutionProvider (onnxruntime-gpu + TensorRT)"
        )
    if importlib.util.find_spec("tensorrt") is not None:
        arms.append("trt-fp16")
    else:
        skipped["trt-fp16"] = "tensorrt (TensorRT's Python API) is not installed"
    return arms, skipped


def arms_for(
    precision: str, keep: str, hardware: str = "cpu", framework: str = "torch"
) -> tuple[list[str], dict[str, str]]:
    """The peer arms of a row, and those left out with the reason."""
    if hardware == kinds.CUDA.name:
        arms, skipped = gpu_arms(framework)
    else:
        arms, skipped = cpu_arms(precision)
    if keep:
        wanted = {a.strip() for a in keep.split(",")}
        skipped.update({a: "not asked for (--arms)" for a in arms if a not in wanted})
        arms = [a for a in arms if a in wanted]
    return arms, skipped


def cpu_arms(precision: str) -> tuple[list[str], dict[str, str]]:
    fp8 = PublishedPrecision.parse(precision) is PublishedPrecision.FP8
    arms, skipped = list(PEERS) + (["ov-int8"] if fp8 else []), {}
    if not set(cpu_flags()) & set(BF16_FLAGS):
        arms.remove("ov-bf16")
        skipped["ov-bf16"] = "this CPU has neither avx512_bf16 nor AMX: OpenVINO would run f32"
    return arms, skipped


def kit_plans(
    model_name: str, precision: str, hardware: str = "cpu", batches: list[int] | None = None
) -> dict[int, dict]:
    """The row's decision at each of `batches` (default: the published ones) exactly as a quick
    `kit reproduce` job makes it, under the key that job carries (kit.batch.profiles.search_params):
    on a kind that searches each batch (a GPU), one per published batch, smallest first, each after
    the one before (kit.studies.model_benchmark.BatchPlanner.searched_each_batch), no near tie
    settled elsewhere; on others one decision at the quick search batch, a near tie settled at the
    largest published one."""
    model = export_model(model_name)
    sizes = published.ipu_run_settings(model_name, precision)["batch_sizes"] or [1]
    wanted = sorted(set(batches or sizes))
    if not kinds.get(hardware).search_each_batch:
        at, settle = search_batch(model_name, sizes, "quick"), max(sizes)
        decision, reused = decide(
            model, precision, at, hardware, SearchSettings("quick", settle_batch=settle)
        )
        return dict.fromkeys(wanted, kit_record(decision, reused, at, settle))
    made, prior = {}, None
    for batch in sorted(sizes):  # reproduce's chain: the published batches only
        if batch > max(wanted):
            break
        made[batch] = decide(
            model, precision, batch, hardware, SearchSettings("quick"), prior=prior
        )
        prior = made[batch][0]
    for batch in sorted(set(wanted) - set(sizes)):
        # an extra batch follows the published one below it
        below = [b for b in sizes if b < batch]
        made[batch] = decide(
            model,
            precision,
            batch,
            hardware,
            SearchSettings("quick"),
            prior=made[max(below)][0] if below else None,
        )
    return {b: kit_record(*made[b], b, None) for b in wanted}


def kit_record(decision, reused: bool, at: int, settle: int | None) -> dict:
    """What the kit's arm runs and what decided it: the batch searched at, the settle batch, the
    decision's key (the one a reproduce job carries) and its cache file."""
    plan = decision.plan
    return {
        "plan": plan.placement.plan(),
        "chosen": decision.chosen,
        "today": decision.today,
        "note": plan.precision_note,
        "searched_s": decision.searched_s,
        "reused": reused,
        "decided_at_batch": at,
        "settle_batch": settle,
        "key": key_hash(decision.key) if decision.key else None,
        "cache_file": decision.cache_file,
    }


def start(arm: str, model: str, batch: int, plan: dict | None):
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(child, arm, model, batch, plan), daemon=True)
    proc.start()
    return proc, parent


def ask(conn, *cmd):
    """Send a command and wait for the reply; a worker that died (killed for memory, crashed in
    native code) is a failed reply with its exit, never a crash of the benchmark."""
    try:
        conn.send(cmd)
        return conn.recv()
    except (EOFError, OSError) as exc:
        return {
            "ok": False,
            "reason": f"the worker process died ({type(exc).__name__}; killed for memory?)",
        }


def first_reply(proc, conn) -> dict:
    """The worker's load reply, or why there is none (it died while loading)."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        proc.join(5)
        return {
            "ok": False,
            "reason": f"the worker process died while loading (exit code {proc.exitcode}; "
            "-9: killed, e.g. for memory)",
        }


def bootstrap_median(ratios: list[float]) -> tuple[float, float | None, float | None]:
    from scipy.stats import bootstrap

    med = statistics.median(ratios)
    if len(ratios) < 3 or len(set(ratios)) < 2:
        return med, None, None
    res = bootstrap(
        (np.asarray(ratios),),
        np.median,
        n_resamples=9999,
        confidence_level=0.95,
        method="percentile",
        random_state=0,
    )
    return med, float(res.confidence_interval.low), float(res.confidence_interval.high)


def numerics_verdict(out: list, ref: list, precision: str) -> NumericsVerdict:
    """An arm's outputs against the fp32 reference by the kit's own numerics gate (the search's
    rule: mean |diff| relative to the reference's mean |value| within its precision class's
    tolerance, and no NaN/Inf the reference does not have)."""
    diff = NumericDiff.between(ref, out)
    extra = max(0, nonfinite(out) - nonfinite(ref))
    return numerics_gate(precision, diff.mean_abs, reference_scale(ref), extra)


def run_batch(model: str, precision: str, batch: int, kit: dict, args) -> dict:
    arms, skipped = arms_for(precision, args.arms, args.hardware, get_entry(model).framework)
    arms = ["kit", *arms]
    workers, loaded = {}, {}
    try:
        for arm in arms:  # loaded one after another (NNCF and compilation are not timed)
            proc, conn = start(arm, model, batch, kit["plan"] if arm == "kit" else None)
            reply = first_reply(proc, conn)
            if reply["ok"]:
                workers[arm], loaded[arm] = (proc, conn), reply
            else:
                skipped[arm] = reply["reason"]
                proc.join(5)
        if "kit" not in workers:
            return {
                "batch_size": batch,
                "error": f"the kit's arm did not load: {skipped.get('kit')}",
                "skipped": skipped,
            }
        if len(workers) == 1:  # nothing to compare the kit with
            why = "; ".join(f"{arm}: {reason}" for arm, reason in skipped.items())
            return {
                "batch_size": batch,
                "error": f"no peer arm loaded ({why or 'none asked for'})",
                "skipped": skipped,
            }
        # what each computes in: the kit's plan's precision, a peer's as its load reply says
        precisions = {
            arm: str(loaded[arm]["description"].get("precision") or "fp32") for arm in workers
        }
        precisions["kit"] = kit["plan"]["precision"]
        numerics = numerics_of(workers, model, batch, precisions)
        per = {arm: [] for arm in workers}
        rss = {arm: loaded[arm].get("peak_rss_mb") for arm in workers}
        order = list(workers)
        loads = []
        for r in range(args.rounds):
            rotated = order[r % len(order) :] + order[: r % len(order)]
            for arm in rotated:
                reply = ask(workers[arm][1], "round", args.seconds)
                per[arm].append(reply["throughput"] if reply["ok"] else float("nan"))
                rss[arm] = max(rss[arm] or 0, reply.get("peak_rss_mb") or 0)
            loads.append(os.getloadavg()[0])
        return {**summarise(batch, per, loaded, skipped, numerics, loads), "peak_rss_mb": rss}
    finally:
        for proc, conn in workers.values():
            try:
                conn.send(("close",))
            except (OSError, BrokenPipeError):
                pass
            proc.join(10)
            if proc.is_alive():
                proc.terminate()


def numerics_of(
    workers: dict, model: str = "", batch: int = 1, precisions: dict | None = None
) -> dict[str, NumericsVerdict]:
    """Each arm's numerics verdict against ONNX Runtime fp32 on the CPU (the ort-fp32 arm's
    outputs, or, a GPU run having no such arm, computed here) at the arm's precision (`precisions`,
    fp32 where not given)."""
    outs = {arm: ask(conn, "outputs") for arm, (_, conn) in workers.items()}
    ref = outs.get("ort-fp32") or (
        {"ok": True, "outputs": reference_outputs(model, batch)} if model else None
    )
    if not ref or not ref["ok"]:
        return {}
    return {
        arm: numerics_verdict(o["outputs"], ref["outputs"], (precisions or {}).get(arm, "fp32"))
        for arm, o in outs.items()
        if o["ok"]
    }


def reference_outputs(model_name: str, batch: int) -> list:
    """The kit's fp32 reference on the arms' inputs: read where the row's search or an earlier
    run kept it (kit.backends.reference_outputs), else run and kept."""
    model = export_model(model_name)
    inputs = model.make_inputs(batch)
    recalled = kept_references.recall(model, batch, inputs)
    if recalled is not None:
        return recalled.outputs
    session = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), batch)
    try:
        outputs = session.run(inputs)
    finally:
        session.close()
    kept_references.remember(model, batch, inputs, outputs, "bench-peers' call on the same inputs")
    return outputs


def summarise(
    batch: int, per: dict, loaded: dict, skipped: dict, numerics: dict, loads: list
) -> dict:
    kit = per["kit"]
    peers = {}
    for arm, thr in per.items():
        if arm == "kit":
            continue
        ratios = [k / p for k, p in zip(kit, thr, strict=True) if p > 0 and k == k and p == p]
        med, low, high = bootstrap_median(ratios) if ratios else (float("nan"), None, None)
        peers[arm] = {
            "throughput_median": statistics.median(thr),
            "throughputs": thr,
            "kit_over_peer": med,
            "ci95": [low, high],
            "ratios": ratios,
            **numerics_fields(numerics.get(arm)),
            "description": loaded[arm]["description"],
            "load_s": loaded[arm]["load_s"],
        }
    # a peer whose outputs fail the gate the kit's own candidates must pass is no yardstick: a
    # broken conversion or a failed launch is fast
    sound = [a for a in peers if peers[a]["numerics_ok"] is not False]
    if peers and not sound:
        why = "; ".join(f"{a}: {peers[a]['numerics_reason']}" for a in peers)
        return {
            "batch_size": batch,
            "error": f"no peer's outputs pass the kit's numerics gate ({why})",
            "peers": peers,
            "skipped": skipped,
        }
    best = max(sound, key=lambda a: peers[a]["throughput_median"]) if sound else None
    ratio, ci = (peers[best]["kit_over_peer"], peers[best]["ci95"]) if best else (None, None)
    kit_numerics = numerics_fields(numerics.get("kit"))
    verdict = (
        TargetVerdict.INCONCLUSIVE
        if kit_numerics["numerics_ok"] is False
        else target_verdict(*(ci or (None, None)), TARGET)
    )
    return {
        "batch_size": batch,
        "kit": {
            "throughput_median": statistics.median(kit),
            "throughputs": kit,
            **kit_numerics,
            "description": loaded["kit"]["description"],
        },
        "peers": peers,
        "best_peer": best,
        "kit_over_best": ratio,
        "kit_over_best_ci95": ci,
        "verdict": verdict,
        "met": verdict is TargetVerdict.MET,
        "skipped": skipped,
        "load_average": {"min": min(loads), "max": max(loads)},
    }


def numerics_fields(verdict: NumericsVerdict | None) -> dict:
    """An arm's numerics as its JSON keeps them (None where no reference was had)."""
    if verdict is None:
        return {"relative_error": None, "numerics_ok": None, "numerics_reason": ""}
    return {
        "relative_error": verdict.relative_error,
        "numerics_ok": verdict.ok,
        "numerics_reason": verdict.reason,
    }


def numerics_failure(arm: dict) -> str:
    """', NUMERICS FAILED: why' for an arm whose outputs fail the gate, else ''."""
    return f", NUMERICS FAILED: {arm['numerics_reason']}" if arm.get("numerics_ok") is False else ""


def fmt_ci(ci) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None else "[no CI]"


def print_batch(model: str, precision: str, kit: dict, b: dict) -> None:
    if "error" in b:
        print(f"  {model} {precision} b{b['batch_size']}: {b['error']}", flush=True)
        return
    err = b["kit"]["relative_error"]
    print(
        f"  {model} {precision} b{b['batch_size']}: kit = {kit['chosen']} "
        f"{b['kit']['throughput_median']:.3g}/s (rel. error {'-' if err is None else f'{err:.2g}'}"
        f"{numerics_failure(b['kit'])}"
        f", peak RSS {b.get('peak_rss_mb', {}).get('kit')} MB); best peer {b['best_peer']}: kit ÷ "
        f"best = {b['kit_over_best']:.2f} {fmt_ci(b['kit_over_best_ci95'])} (target >= {TARGET}: "
        f"{b['verdict']}; load {b['load_average']['min']:.1f}-"
        f"{b['load_average']['max']:.1f})",
        flush=True,
    )
    for arm, p in b["peers"].items():
        err = p["relative_error"]
        print(
            f"      vs {arm:8s} {p['throughput_median']:9.3g}/s  kit ÷ peer "
            f"{p['kit_over_peer']:.2f} {fmt_ci(p['ci95'])}  rel. error "
            f"{'-' if err is None else f'{err:.2g}'}{numerics_failure(p)}",
            flush=True,
        )
    for arm, why in b["skipped"].items():
        print(f"      {arm}: skipped ({why})", flush=True)


def table(results: list[dict]) -> str:
    lines = [
        "| row | batch | kit's choice | kit /s | best peer | peer /s | kit ÷ best peer [95 % CI] | "
        "kit ÷ ORT fp32 [95 % CI] | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for b in r["batches"]:
            if "error" in b:
                lines.append(
                    f"| {r['model']} {r['published']} | {b['batch_size']} | {b['error']} |||||||"
                )
                continue
            best, ort = b["peers"][b["best_peer"]], b["peers"].get("ort-fp32")
            lines.append(
                f"| {r['model']} {r['published']} | {b['batch_size']} | "
                f"{(b.get('kit_decision') or r['kit'])['chosen']} | "
                f"{b['kit']['throughput_median']:.3g} | {b['best_peer']} | "
                f"{best['throughput_median']:.3g} | {b['kit_over_best']:.2f} "
                f"{fmt_ci(b['kit_over_best_ci95'])} | "
                + (f"{ort['kit_over_peer']:.2f} {fmt_ci(ort['ci95'])}" if ort else "-")
                + f" | {b['verdict']} |"
            )
    return "\n".join(lines)


def vector_flags(flags: frozenset[str] | set[str]) -> list[str]:
    """The CPU's flags that change which candidates run and how (512-bit vectors, AMX, VNNI)."""
    return sorted(f for f in flags if f.startswith(("avx512", "amx", "avx_vnni")))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.hardware = resolve_hardware(args.hardware)
    flags = vector_flags(cpu_flags())
    peers = (
        "plain PyTorch fp16 / ORT TensorRT / TensorRT on the GPU"
        if args.hardware == kinds.CUDA.name
        else "plain ORT fp32 / OpenVINO"
    )
    print(
        f"peers: kit vs {peers}, {args.rounds} interleaved rounds of {args.seconds:g} s; "
        f"CPU flags {' '.join(flags) or 'none of avx512*, amx*, avx_vnni'} ({load_note()})",
        flush=True,
    )
    try:
        asked = rows(args.rows)
        out = os.path.abspath(output_file(args.out, "peers.json"))
    except InvalidParameter as exc:
        print(f"bench-peers: {exc}", file=sys.stderr)
        return 2
    results: list[dict] = []
    try:
        run_rows(asked, args, flags, out, results)
    except KeyboardInterrupt:
        where = f"kept in {out}" if results else "nothing written"
        print(f"\n  interrupted: {len(results)} finished row(s) {where}", flush=True)
        return 130
    print(table(results))
    print(f"  written {out} ({load_note()} at the end)")
    missed = any(
        "error" in b or b["verdict"] == TargetVerdict.MISSED for r in results for b in r["batches"]
    )
    return 1 if missed and strict() else 0


def run_rows(asked: list, args, flags: list[str], out: str, results: list[dict]) -> None:
    """Each asked row measured and appended to `results`, written to `out` after every row."""
    for model, precision, given in asked:
        started = time.perf_counter()
        sizes = batches_of(model, precision, args.batches, given)
        try:
            kits = kit_plans(model, precision, args.hardware, sizes)
        except Exception as exc:  # noqa: BLE001 - one row failing never stops the others
            print(
                f"  {model} {precision}: the kit's search failed ({type(exc).__name__}: {exc})",
                flush=True,
            )
            continue
        row = {
            "model": model,
            "published": precision,
            "kit": kits[sizes[0]],
            "batches": [],
            "published_batches": published.ipu_run_settings(model, precision)["batch_sizes"],
        }
        for batch in sizes:
            b = {
                **run_batch(model, precision, batch, kits[batch], args),
                "kit_decision": kits[batch],
            }
            print_batch(model, precision, kits[batch], b)
            row["batches"].append(b)
        row["seconds"] = round(time.perf_counter() - started, 1)
        results.append(row)
        # after every row: an interrupted run keeps what it measured
        write(out, args, flags, results)


def write(out: str, args, flags: list[str], results: list[dict]) -> None:
    """The results so far, atomically (a Ctrl-C mid-write leaves the previous rows' file)."""
    env = capture()
    ran_on = (
        f"GPU {', '.join(env.get('gpus') or []) or 'unknown'}, every arm timed host to host"
        if args.hardware == kinds.CUDA.name
        else None
    )  # None: the CPU and its flags
    write_text(
        out,
        json.dumps(
            {
                "environment": env,
                "hardware": args.hardware,
                "ran_on": ran_on,
                "cpu_flags": flags,
                "rounds": args.rounds,
                "seconds": args.seconds,
                "method": "separate warm processes per arm, interleaved rotated rounds, per-round "
                "kit ÷ peer, median with a bootstrap 95 % CI (scipy.stats.bootstrap, percentile, "
                "9999 resamples)",
                "target": TARGET,
                "rows": results,
            },
            indent=1,
            default=str,
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
