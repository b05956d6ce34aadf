"""The Server-scenario study the notebook runs: fixed-batch latencies, LoadGen search per
batching policy, the simulator's prediction and its error, and the C2 card prediction."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kit.backends import BackendConfig, require_backend
from kit.backends.base import Session
from kit.environment import capture
from kit.measure import MeasureConfig
from kit.models import load_model
from kit.models.spec import ExportedModel
from kit.paths import outputs_dir
from kit.results import RunResult
from kit.serving.batcher import BatchPolicy
from kit.serving.c2 import C2_IPUS, SOURCE, per_ipu_table, published_c2_latency
from kit.serving.loadgen_sut import BatchExecutor, LoadGenConfig, LoadGenRunner, SampleLibrary
from kit.serving.search import Probe, SearchResult, find_max_qps
from kit.serving.simulate import ServiceModel, predict_max_qps, simulate
from kit.serving.summary import LoadGenSummary

DEFAULT_POLICIES = ((1, 0.0), (4, 10.0), (8, 20.0))
C2_POLICIES = ((1, 0.0), (2, 2.0), (4, 5.0), (6, 10.0))
PREDICTION_LABEL = "PREDICTION: simulated from the published C2 latency table, not measured"


def measure_latency_table(session: Session, model: ExportedModel, sizes: Sequence[int],
                          duration_s: float = 1.0, min_count: int = 5) -> dict[int, list[float]]:
    """Per-call latencies (ms) of fixed batches: the simulator's input."""
    cfg = MeasureConfig(warmup=2, min_duration_s=duration_s, min_count=min_count)
    table = {}
    for b in sizes:
        m = session.measure(model.make_inputs(b), b, cfg)
        table[b] = [(end - start) / 1e6 for thread in m.calls for start, end in thread]
    return table


def table_sizes(policies: Sequence[BatchPolicy]) -> list[int]:
    top = max(p.max_batch for p in policies)
    powers = [1 << i for i in range(top.bit_length()) if 1 << i <= top]
    return sorted({1, top, *powers, *(p.max_batch for p in policies)})


def loadgen_probe(runner: LoadGenRunner, base: LoadGenConfig, policy: BatchPolicy, log_root: Path,
                  criterion: str = "bound") -> Callable[[float], Probe]:
    """run(qps) for the search: one LoadGen Server test, judged on the bound or on VALID."""

    def run(qps: float) -> Probe:
        cfg = LoadGenConfig(**{**base.to_dict(), "scenario": "Server", "target_qps": qps})
        s = runner.run(cfg, policy, log_root / _slug(policy) / f"qps-{qps:.3f}")
        passed = s.valid if criterion == "valid" else (
            s.meets_bound(cfg.latency_bound_ms) and s.constraints.get("Performance constraints satisfied", True))
        return Probe(qps, s.p99_ms, bool(passed), s.valid, s.reasons, _probe_extra(s))

    return run


def _probe_extra(s: LoadGenSummary) -> dict:
    return {"result": s.result, "completed_sps": s.samples_per_second, "p90_ms": s.p90_ms,
            "mean_ms": s.mean_ms, "log_dir": s.log_dir, "batcher": s.extra.get("batcher"),
            "lost_queries": s.extra.get("lost_queries"),
            "duplicate_completions": s.extra.get("duplicate_completions")}


def _slug(policy: BatchPolicy) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", policy.label).strip("-")


def compare_rows(policy: BatchPolicy, search: SearchResult, service: ServiceModel,
                 sim_queries: int, seed: int) -> list[dict]:
    """Each LoadGen probe beside the simulator's p99 at the same offered rate."""
    rows = []
    for p in search.probes:
        sim = simulate(service, policy, p.qps, queries=sim_queries, seed=seed)
        err = 100 * (sim.p99_ms - p.p99_ms) / p.p99_ms if p.p99_ms else None
        rows.append({"policy": policy.label, "offered_qps": p.qps, "loadgen_p99_ms": p.p99_ms,
                     "sim_p99_ms": sim.p99_ms, "p99_error_pct": err, "passed": p.passed,
                     "loadgen_result": p.extra.get("result"),
                     "completed_sps": p.extra.get("completed_sps"),
                     "mean_batch": (p.extra.get("batcher") or {}).get("mean_batch"),
                     "sim_mean_batch": sim.mean_batch, "reasons": "; ".join(p.reasons),
                     "log_dir": p.extra.get("log_dir")})
    return rows


def best_row(policy: BatchPolicy, search: SearchResult, predicted: SearchResult, capacity: float,
             bound_ms: float) -> dict:
    lg_best, sim_best = search.best_qps, predicted.best_qps
    err = 100 * (sim_best - lg_best) / lg_best if lg_best and sim_best else None
    best = search.best
    return {"policy": policy.label, "max_batch": policy.max_batch, "timeout_ms": policy.timeout_ms,
            "latency_bound_ms": bound_ms, "loadgen_best_qps": lg_best,
            "loadgen_p99_ms": best.p99_ms if best else None,
            "loadgen_result": (best.extra.get("result") if best else None) or "none passed",
            "loadgen_reasons": "; ".join(best.reasons if best else _lowest(search).reasons),
            "sim_best_qps": sim_best, "prediction_error_pct": err, "capacity_qps": capacity,
            "search_stopped": search.stopped, "probes": len(search.probes)}


def _lowest(search: SearchResult) -> Probe:
    """The gentlest probe: when nothing passed, its reasons say why."""
    return min(search.probes, key=lambda p: p.qps)


def simulated_curve(service: ServiceModel, policy: BatchPolicy, capacity: float, points: int,
                    queries: int, seed: int) -> list[dict]:
    rates = np.linspace(capacity / points, capacity * 0.98, points)
    return [{"policy": policy.label, "offered_qps": float(q),
             "sim_p99_ms": simulate(service, policy, float(q), queries=queries, seed=seed).p99_ms}
            for q in rates]


def c2_prediction(card_latency_ms: dict[int, float], policies: Sequence[BatchPolicy],
                  bound_ms: float, queries: int = 20000, seed: int = 0) -> list[dict]:
    """What the C2 card would sustain under `bound_ms`: two IPU servers, published latencies."""
    service = ServiceModel(per_ipu_table(card_latency_ms), resample=False)
    rows = []
    for policy in policies:
        pred = predict_max_qps(service, policy, bound_ms, servers=C2_IPUS, queries=queries, seed=seed)
        rows.append({"policy (per IPU)": policy.label, "servers": C2_IPUS, "latency_bound_ms": bound_ms,
                     "predicted_max_qps": pred.best_qps,
                     "predicted_p99_ms": pred.best.p99_ms if pred.best else None,
                     "capacity_qps": service.capacity(policy, C2_IPUS),
                     "limited_by": "capacity" if pred.stopped == "upper bound" else "latency bound",
                     "label": PREDICTION_LABEL, "source": SOURCE})
    return rows


def run_server_study(model: str = "resnet50-torch-fp32", backend: str = "onnxruntime",
                     precision: str = "fp32", latency_bound_ms: float = 100.0,
                     policies: Sequence = DEFAULT_POLICIES, *, small: bool = False,
                     min_duration_s: float = 2.0, min_query_count: int = 64, max_duration_s: float = 0.0,
                     sample_count: int = 32,
                     max_probes: int = 5, rel_tol: float = 0.1, criterion: str = "bound",
                     fixed_batch_duration_s: float = 1.0, threads: int | None = None,
                     c2_latency_ms: dict | None = None, c2_policies: Sequence = C2_POLICIES,
                     sim_queries: int = 20000, seed: int = 0, output_dir: Path | str | None = None,
                     results_path: Path | str | None = None) -> RunResult:
    """Run the whole study and write its RunResult JSON (kind 'server_scenario')."""
    policies = [BatchPolicy.parse(p) for p in policies]
    out = Path(output_dir) if output_dir else outputs_dir() / "server_scenario"
    params = {"model": model, "backend": backend, "precision": precision,
              "latency_bound_ms": latency_bound_ms, "policies": [p.to_dict() for p in policies],
              "small": small, "min_duration_s": min_duration_s, "min_query_count": min_query_count,
              "max_duration_s": max_duration_s,
              "sample_count": sample_count, "max_probes": max_probes, "rel_tol": rel_tol,
              "criterion": criterion, "fixed_batch_duration_s": fixed_batch_duration_s,
              "threads": threads, "sim_queries": sim_queries, "seed": seed, "output_dir": str(out)}
    result = RunResult("server_scenario", f"{model}-{backend}-{precision}", params, capture())
    try:
        _study(result, model, backend, precision, latency_bound_ms, policies, small, threads, out,
               LoadGenConfig(latency_bound_ms=latency_bound_ms, min_duration_s=min_duration_s,
                             min_query_count=min_query_count, max_duration_s=max_duration_s,
                             sample_count=sample_count, seed=seed),
               max_probes, rel_tol, criterion, fixed_batch_duration_s, sim_queries, seed)
    except Exception as exc:  # noqa: BLE001 - recorded in the result, re-raised after writing
        result.fail(exc)
        result.write(Path(results_path) if results_path else out / "server_scenario.json")
        raise
    _c2(result, c2_latency_ms, [BatchPolicy.parse(p) for p in c2_policies], latency_bound_ms, sim_queries, seed)
    result.write(Path(results_path) if results_path else out / "server_scenario.json")
    return result


def _study(result: RunResult, model_name: str, backend_name: str, precision: str, bound_ms: float,
           policies: list[BatchPolicy], small: bool, threads: int | None, out: Path,
           base: LoadGenConfig, max_probes: int, rel_tol: float, criterion: str,
           fixed_s: float, sim_queries: int, seed: int) -> None:
    model = load_model(model_name, small=small)
    backend = require_backend(backend_name)
    config = BackendConfig(precision=precision, threads=threads)
    top = max(p.max_batch for p in policies)
    sizes = table_sizes(policies)
    sessions = ({top: backend.load(model, config, top)} if model.dynamic_batch
                else {b: backend.load(model, config, b) for b in sizes})
    any_session = sessions[top]
    result.model = model.to_dict()
    result.backend = {"name": backend_name, **config.to_dict(), "session": any_session.description,
                      "device_info": backend.device_info(config)}
    if model.dynamic_batch:
        table = measure_latency_table(sessions[top], model, sizes, fixed_s)
    else:  # one session per size, each timed at its own size
        table = {b: measure_latency_table(sessions[b], model, [b], fixed_s)[b] for b in sizes}
    service = ServiceModel(table)
    result.tables["fixed_batch"] = [
        {"batch_size": b, "median_ms": float(np.median(v)), "p99_ms": float(np.percentile(v, 99)),
         "samples_per_s": b / (float(np.median(v)) / 1e3), "calls": len(v)} for b, v in table.items()]
    executor = BatchExecutor(sessions, model.inputs, dynamic=model.dynamic_batch)
    library = SampleLibrary(model.inputs, base.sample_count, seed)
    executor.warm_up(library[0], repeats=1)
    runner = LoadGenRunner(executor, library)
    for key in ("probes", "best", "simulated_curve"):
        result.tables.setdefault(key, [])
    for policy in policies:
        capacity = service.capacity(policy)
        predicted = predict_max_qps(service, policy, bound_ms, queries=sim_queries, seed=seed)
        start = predicted.best_qps or capacity / 4
        search = find_max_qps(loadgen_probe(runner, base, policy, out / "loadgen", criterion),
                              start_qps=start, upper_qps=capacity * 1.5, rel_tol=rel_tol,
                              max_probes=max_probes, min_qps=start / 16)
        result.tables["probes"] += compare_rows(policy, search, service, sim_queries, seed)
        result.tables["best"].append(best_row(policy, search, predicted, capacity, bound_ms))
        result.tables["simulated_curve"] += simulated_curve(service, policy, capacity, 12, sim_queries, seed)
    result.notes.append(
        f"Pass criterion '{criterion}': "
        + ("LoadGen VALID." if criterion == "valid" else
           f"LoadGen p99 <= {bound_ms:g} ms with no lost query; LoadGen's VALID/INVALID and its "
           "reasons are reported beside it (short runs are INVALID for early stopping alone)."))
    result.notes.append("Simulator: Poisson arrivals through the same (B, T) policy, service times "
                        "resampled from the fixed-batch measurements above; prediction error = "
                        "(simulated - LoadGen) / LoadGen.")


def _c2(result: RunResult, card_latency_ms: dict | None, policies: list[BatchPolicy], bound_ms: float,
        sim_queries: int, seed: int) -> None:
    try:
        table = card_latency_ms or published_c2_latency()
    except Exception as exc:  # noqa: BLE001 - the prediction is optional
        result.notes.append(f"C2 prediction skipped: {exc}")
        return
    result.tables["c2_prediction"] = c2_prediction({int(k): float(v) for k, v in table.items()},
                                                   policies, bound_ms, sim_queries, seed)
    result.notes.append(PREDICTION_LABEL)
